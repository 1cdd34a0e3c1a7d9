"""The op x shape table (summary/op_shapes.py, JSON ``ops_by_shape``): a hand-built GPU trace whose
rows are known by construction, a CPU trace, the GPU fixture's extern GEMMs against the FLOPs of
their recorded shapes, and a real trace on which the two engines agree."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter

import pytest

from inductor_perf.report.text import compact_shapes, format_summary
from inductor_perf.summary.core import summarize
from inductor_perf.summary.files import summarize_file
from inductor_perf.summary.stream import engine as summary_stream

HERE = os.path.dirname(__file__)
GPT = os.path.join(HERE, "..", "..", "fixtures", "gpu", "gpt_bf16.trace.json.gz")
REAL = "/work/shared/traces/v100_ranks2_r1_test.json.gz"


def _op(name: str, ts: float, dur: float, dims: list | None = None, types: list | None = None) -> dict:
    args = {} if dims is None else {"Input Dims": dims, "Input type": types}
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": args}


def _launch(corr: int, ts: float) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 0.5, "pid": 1, "tid": 1,
            "args": {"correlation": corr}}


def _kernel(corr: int, ts: float, dur: float, flop: int, name: str = "gemm") -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"correlation": corr, "kernel_flop": flop, "kernel_num_gb": 0.001}}


BIG, SMALL, F = [[4, 8], [8, 16]], [[2, 8], [8, 16]], ["float", "float"]
# Two aten::mm calls of one shape (kernels of 5 and 7 µs, 1024 FLOPs each), one of another (3 µs,
# 512 FLOPs), an aten::addmm inside aten::linear that launches two kernels (2 and 4 µs: one call;
# the innermost op is the launcher), and a kernel no op launched (1 µs).
TRACE = {"traceEvents": [
    _op("aten::mm", 0, 10, BIG, F), _launch(1, 2), _kernel(1, 20, 5, 1024),
    _op("aten::mm", 12, 5, BIG, F), _launch(2, 13), _kernel(2, 26, 7, 1024),
    _op("aten::mm", 30, 5, SMALL, F), _launch(3, 31), _kernel(3, 40, 3, 512),
    _op("aten::linear", 50, 20), _op("aten::addmm", 51, 15, [[16], [4, 8], [8, 16]], ["float"] * 3),
    _launch(4, 52), _launch(5, 55), _kernel(4, 60, 2, 100, "gemm_bias"), _kernel(5, 63, 4, 0, "fill"),
    _kernel(9, 70, 1, 0, "orphan"),
]}


def _rows(d: dict) -> list[tuple]:
    return [(r["op"], r["shapes"], r["calls"], r["kernels"], r["total_us"], r["mean_us"], r["flop"])
            for r in d["ops_by_shape"]]


EXPECTED = [
    ("aten::mm", "[[4,8],[8,16]]", 2, 2, 12.0, 6.0, 2048),
    ("aten::addmm", "[[16],[4,8],[8,16]]", 1, 2, 6.0, 6.0, 100),
    ("aten::mm", "[[2,8],[8,16]]", 1, 1, 3.0, 3.0, 512),
    ("(no launching op)", None, 1, 1, 1.0, 1.0, 0),
]


def test_hand_built_gpu_trace():
    d = summarize(TRACE).to_dict()
    assert _rows(d) == EXPECTED
    top = d["ops_by_shape"][0]
    assert top["dtypes"] == "float, float"
    assert top["achieved_tflops"] == pytest.approx(2048 / 12e-6 / 1e12, rel=1e-5)  # FLOPs over 12 µs
    assert top["pct_of_roof"] is None  # no device: no roof, unknown rather than 0


def test_streaming_engine_gives_the_same_rows(tmp_path):
    p = tmp_path / "ops.json"
    p.write_text(json.dumps(TRACE))
    full = summarize_file(str(p), engine="full").summary.to_dict()
    streamed = summary_stream.summarize_file_stream(str(p))[0].to_dict()
    assert _rows(full) == EXPECTED
    assert streamed["ops_by_shape"] == full["ops_by_shape"]


def test_top_bounds_the_rows():
    assert [r.total_us for r in summarize(TRACE, top=2).ops_by_shape] == [12.0, 6.0]


def test_cpu_eager_ops_keyed_by_their_own_shapes():
    trace = {"traceEvents": [_op("aten::mm", 0, 10, BIG, F), _op("aten::mm", 20, 30, BIG, F),
                             _op("aten::mm", 60, 4, SMALL, F), _op("aten::relu", 70, 2)]}
    rows = [(r.op, r.shapes, r.calls, r.total_us) for r in summarize(trace).ops_by_shape]
    assert rows == [("aten::mm", "[[4,8],[8,16]]", 2, 40.0), ("aten::mm", "[[2,8],[8,16]]", 1, 4.0),
                    ("aten::relu", None, 1, 2.0)]


def test_cpu_compiled_kernels_say_compiled():
    k = {"ph": "X", "cat": "cpu_op", "name": "graph_0_cpp_fused_add_0", "ts": 0, "dur": 5, "pid": 1, "tid": 1,
         "args": {"kernel_kind": "generated", "eager_ops": "aten::add", "kernel_flop": 10}}
    rows = summarize({"traceEvents": [k, {**k, "ts": 10, "dur": 3}]}).ops_by_shape
    assert [(r.op, r.shapes, r.calls, r.total_us, r.flop) for r in rows] == [("aten::add", "compiled", 2, 8.0, 20)]


def test_text_and_page_table():
    text = format_summary(summarize(TRACE))
    assert "By op and input shapes (top 4)" in text
    assert "4x8 8x16 (f32)" in text
    assert compact_shapes("[[16],[],[4,8]]") == "16 4x8"


def test_gpt_fixture_extern_gemms_grouped_by_shape():
    """Each aten::mm row: its calls are the trace's aten::mm ops of those Input Dims that launched
    a kernel, its FLOPs 2*M*K*N of those dims per call (hand arithmetic from the recorded shapes)."""
    with gzip.open(GPT, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})]
    kernel_corr = {e["args"]["correlation"] for e in events if e.get("cat") == "kernel"}
    calls: Counter = Counter()
    for op in (e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm"):
        if any(op["ts"] <= r["ts"] <= op["ts"] + op["dur"] and r["tid"] == op["tid"]
               and r["args"]["correlation"] in kernel_corr for r in launches):
            calls[json.dumps(op["args"]["Input Dims"], separators=(",", ":"))] += 1
    rows = {r["shapes"]: r for r in summarize_file(GPT, engine="full").summary.to_dict()["ops_by_shape"]
            if r["op"] == "aten::mm"}
    assert rows and set(rows) <= set(calls)
    for shapes, r in rows.items():
        (m, k), (k2, n) = json.loads(shapes)[:2]
        assert k == k2
        assert r["calls"] == calls[shapes]
        assert r["flop"] == 2 * m * k * n * calls[shapes]
        assert r["dtypes"].startswith("c10::BFloat16")
        assert r["pct_of_roof"] is not None and (r["pct_of_roof"] <= 100 or r["above_roof_reason"])
    generated = [r for r in summarize_file(GPT, engine="full").summary.ops_by_shape if r.shapes == "compiled"]
    assert generated and all(r.op.startswith("aten::") for r in generated)


@pytest.mark.skipif(not os.path.exists(REAL), reason="the shared real traces are not on this machine")
def test_real_trace_engines_agree():
    full = summarize_file(REAL, engine="full").summary.to_dict()["ops_by_shape"]
    streamed = summarize_file(REAL, engine="stream").summary.to_dict()["ops_by_shape"]
    assert streamed == full
    assert len(full) == 20 and any(r["shapes"] and r["shapes"].startswith("[[") for r in full)
    assert [r["total_us"] for r in full] == sorted((r["total_us"] for r in full), reverse=True)
