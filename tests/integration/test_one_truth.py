"""One truth per trace: the summary a capture writes (``profile()``: capture.session.process_trace) and
``inductor-perf summary`` of the trace file it wrote give the same figures, field by field, for a
compiled and an eager capture, with either summary engine, and the page draws the same roofs."""

from __future__ import annotations

import json

import pytest
import torch

import inductor_perf
from conftest import eager_flops, make
from json_close import IN_PROCESS_ONLY, field_diffs

BY_NATURE = IN_PROCESS_ONLY  # the fields allowed to differ, each with its reason


def _capture(out_dir, name, compiled):
    torch.manual_seed(0)
    model, (x,) = make("mlp")
    if compiled:
        # kernel_profile: the generated kernels compiled before the window keep their names in the trace
        model = torch.compile(model, backend="inductor_perf", options={"inductor_perf.kernel_profile": True})
    for _ in range(2):
        model(x).sum().backward()
    with inductor_perf.profile(str(out_dir), name=name) as p:
        for _ in range(2):
            model(x).sum().backward()
            p.step()
    assert p.result is not None and p.result.trace_path, p.result
    return p.result


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_truth")
    return {name: _capture(out, name, compiled=name == "compiled") for name in ("compiled", "eager")}


@pytest.mark.parametrize("name", ["compiled", "eager"])
@pytest.mark.parametrize("engine", ["full", "stream"])
def test_capture_summary_equals_offline_summary_of_its_trace(captures, name, engine):
    result = captures[name]
    with open(result.summary_json_path) as f:
        written = json.load(f)
    offline = inductor_perf.summarize(result.trace_path, engine=engine).to_dict()  # the CLI's path, findings too
    diffs = [d for d in field_diffs(written, offline) if d.split(":")[0].split(".")[1].split("[")[0] not in BY_NATURE]
    assert diffs == []
    # the capture's summary object is the one it wrote
    assert field_diffs(result.summary.to_dict(), {k: v for k, v in written.items() if k != "capture"}) == []


def test_capture_summaries_know_their_peaks_and_kernels(captures):
    """Offline, a capture keeps the peaks it was measured against (recorded in the trace), and the
    eager capture's kernels are its outermost aten ops, costed from their shapes, as in the process."""
    compiled = json.load(open(captures["compiled"].summary_json_path))
    eager = json.load(open(captures["eager"].summary_json_path))
    assert compiled["kernel_definition"] == "cpu-compiled-kernels"
    assert eager["kernel_definition"] == "cpu-eager-aten"
    for s in (compiled, eager):
        assert s["peak"]["device"] and s["peak"]["peak_tflops"] > 0, s["peak"]
        assert "recorded with the trace" in s["device_note"]
    # every FLOP costed in the eager trace counts once in the summary (an op's cost sits on the op
    # that does the work, aten::addmm inside aten::linear; the kernel is the outermost op), and the
    # matmul part is FlopCounterMode's count of the same two steps
    from inductor_perf.traces.files import load_trace

    args = [e.get("args") or {} for e in load_trace(captures["eager"].trace_path)["traceEvents"]]
    assert eager["flop"] == sum(a.get("kernel_flop", 0) for a in args) > 0
    counted = eager_flops("mlp")
    assert sum(a.get("kernel_matmul_flop", 0) for a in args) == 2 * (counted.fwd_total + counted.bwd_total)
    assert eager["costs_note"] and "recorded shapes" in eager["costs_note"]


def test_capture_page_draws_the_roofs_offline_page_draws(captures, tmp_path):
    from inductor_perf.report.html import write_report

    result = captures["compiled"]
    page = open(result.report_path).read()
    offline = open(write_report(result.trace_path, tmp_path / "page.html")).read()
    roofs = [line for line in page.splitlines() if line.startswith("<p><b>Roofs")]
    assert roofs and roofs == [line for line in offline.splitlines() if line.startswith("<p><b>Roofs")]
