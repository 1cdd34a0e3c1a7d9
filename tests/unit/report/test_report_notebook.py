"""In a notebook, a capture's result shows as its report page: ``CaptureResult._repr_html_`` holds
the page ``render_report`` makes of the same summary (in an iframe's ``srcdoc``, so the page's
stylesheet stays in it), a page that parses and holds the kernels table."""

from __future__ import annotations

from html.parser import HTMLParser

from inductor_perf.capture.session import CaptureResult
from inductor_perf.report.html import render_report
from inductor_perf.summary.core import summarize

DEVICE = {"name": "Test GPU", "peak_tflops": {"bfloat16": 100.0}, "mem_bandwidth_gbs": 1000.0,
          "peak_source": "datasheet"}
TRACE = {"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "ts": 0, "dur": 1000, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "kernel", "name": "gemm_a", "ts": 100, "dur": 200, "pid": 0, "tid": 7,
     "args": {"kernel_flop": 2e10, "kernel_matmul_flop": 2e10, "kernel_dtype": "bfloat16", "launch_op": "aten::mm"}},
]}


class _Page(HTMLParser):
    """The iframes' srcdoc (unescaped by the parser), the ids of the tables, and the open tags left."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr", "path", "rect",
            "line", "circle", "polyline", "text"}

    def __init__(self) -> None:
        super().__init__()
        self.srcdocs: list[str] = []
        self.table_ids: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "iframe" and "srcdoc" in a:
            self.srcdocs.append(a["srcdoc"])
        if tag == "table" and a.get("id"):
            self.table_ids.append(a["id"])
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass


def _parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    p.close()
    return p


def test_capture_result_shows_its_report_page():
    summary = summarize(TRACE, device=DEVICE, dtype="bfloat16", label="run")
    shown = CaptureResult(summary=summary, device=DEVICE)._repr_html_()
    outer = _parse(shown)
    assert len(outer.srcdocs) == 1
    page = outer.srcdocs[0]
    assert page == render_report(None, device=DEVICE, summary=summary, title="run")
    inner = _parse(page)
    assert "kernels" in inner.table_ids
    assert not inner.open  # every element closed
    assert "gemm_a" in page and "MFU" in page and "<h3>Idle time by stream" in page


def test_capture_without_summary_says_why():
    shown = CaptureResult(warnings=["nothing was captured"])._repr_html_()
    assert "nothing was captured" in shown and "<iframe" not in shown


def test_capture_result_opens_with_its_findings_linked_to_the_tables():
    # the launch-bound GPT capture (tests/fixtures/gpu): findings first, each link to a table of the page
    from engine_inputs import FIXTURES

    from inductor_perf.advice.advise import attach
    from inductor_perf.summary.files import summarize_file

    ct = summarize_file(str(FIXTURES / "gpu" / "gpt_bf16.trace.json.gz"))
    summary = attach(ct.summary)
    assert summary.findings
    page = _parse(CaptureResult(summary=summary, device=ct.device)._repr_html_()).srcdocs[0]
    assert page.index("What to fix first") < page.index("<dl class='head'>") < page.index("<table")
    inner = _parse(page)
    assert not inner.open
    assert {"kernels", "idle-by-stream", "idle-by-host"} <= set(inner.table_ids)
