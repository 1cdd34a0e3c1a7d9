"""Lower-bound costs and graph replays on a hand-made trace with an older profiler's records
(tests/fixtures/old_records_bound_replay.json, made by make_bound_trace.py): what augment writes on
each kernel, that the fast path and the streaming summary say the same, and what the summary says.

Every expected number is hand arithmetic on the fixture's recorded shapes (comments), float32.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inductor_perf.augment import core as A
from inductor_perf.model import events as evs
from inductor_perf.summary.stream import engine as summary_stream
from inductor_perf.report.text import format_summary
from inductor_perf.summary.files import summarize_file, trace_label

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "old_records_bound_replay.json"

# aten::sum [1024, 40], dims unrecorded: reads 1024*40*4; writes at least one float; 1 FLOP per input.
SUM = {"kernel_flop": 40_960, "kernel_bytes_read": 163_840, "kernel_bytes_written": 4}
# native_layer_norm_backward at [1024, 4864], mask unrecorded: the reads alone (the all-False mask),
# (2*1024*4864 + 2*1024 + 2*4864) * 4 = 39,892,992 bytes, split 20:10 by its kernels' durations.
LNB_READ = 39_892_992
# aten::mm [64, 32] x [32, 16], recorded in full: 2*64*32*16 FLOPs, (64*32 + 32*16) * 4 read, 64*16*4 written.
MM = {"kernel_flop": 65_536, "kernel_bytes_read": 10_240, "kernel_bytes_written": 4_096}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path / "cache"))


def _kernels(path: Path) -> dict[str, dict]:
    trace = json.loads(path.read_text())
    return {ev["name"]: ev["args"] for ev in trace["traceEvents"] if ev.get("cat") == "kernel"}


def test_augment_marks_lower_bounds_and_graph_replays(tmp_path):
    out = tmp_path / "aug.json"
    stats = A.augment_file(FIXTURE, out, fast=False)
    assert stats.ops_lower_bound == 2 and "2 ops costed as a lower bound" in stats.summary_line()
    k = _kernels(out)
    red = k["void at::native::reduce_kernel<512, 1>"]
    assert {key: red[key] for key in SUM} == SUM and red[evs.COST_BOUND] == "lower"
    grad_in = k["void at::native::layer_norm_grad_input_kernel"]
    gamma = k["void at::native::GammaBetaBackwardCUDAKernel"]
    # 39,892,992 = 3 * 13,297,664: the 20:10 split is exact
    assert (grad_in["kernel_bytes_read"], gamma["kernel_bytes_read"]) == (26_595_328, 13_297_664)
    assert grad_in[evs.COST_BOUND] == gamma[evs.COST_BOUND] == "lower"
    assert grad_in["kernel_flop"] == gamma["kernel_bytes_written"] == 0
    mm = k["void cutlass::Kernel<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>"]
    assert {key: mm[key] for key in MM} == MM and evs.COST_BOUND not in mm  # exact: no mark
    for name in ("triton_poi_fused_add_0", "triton_red_fused_sum_1"):
        assert k[name] == {"correlation": 105, evs.LAUNCH_OP: "CompiledFunction", evs.NOT_COSTED: "graph_replay"}


@pytest.mark.parametrize("two_processes", [False, True])
def test_fast_path_writes_the_same(tmp_path, monkeypatch, two_processes):
    # Fast path first, on a cold signature cache: with its worker forced on, the worker leaves the
    # bounds to the parent (costs.ops.meta.defer_torch), and the graph launch may sit in the other half.
    pytest.importorskip("orjson")
    from inductor_perf.augment.stream import engine as S

    if two_processes and not hasattr(os, "fork"):
        pytest.skip("no os.fork here")
    monkeypatch.setattr(S, "LARGE_TRACE_BYTES", 0 if two_processes else 1 << 62)
    full, fast = tmp_path / "full.json", tmp_path / "fast.json"
    s_fast = A.augment_file(FIXTURE, fast, fast=True)
    s_full = A.augment_file(FIXTURE, full, fast=False)
    assert (s_fast.worker_maxrss_kb is not None) == two_processes
    s_fast.worker_maxrss_kb, s_fast.stage_marks = None, ()
    assert json.loads(full.read_text()) == json.loads(fast.read_text()) and s_full == s_fast
    assert s_fast.ops_lower_bound == 2


def test_summary_says_the_lower_bound_share_and_why_replays_are_not_costed(tmp_path, monkeypatch):
    s = summarize_file(str(FIXTURE), engine="full").summary
    # kernels: sum 10, layer-norm backward 20 + 10, mm 15, replay 5 + 5 = 65 us; costed 55 us, of
    # which 40 us (sum and layer-norm backward) a lower bound.
    assert s.costed_time_pct == pytest.approx(100 * 55 / 65, abs=1e-3)
    assert s.lower_bound_pct == pytest.approx(100 * 40 / 55, abs=1e-3)
    rows = [(r.op, r.reason, r.total_us, r.count) for r in s.uncosted]
    assert rows == [("CompiledFunction", "graph_replay", 10, 2)]
    assert "cudaGraphLaunch" in s.uncosted[0].hint
    text = " ".join(format_summary(s, "text").split())  # the headline wraps
    assert "72.7 % of it only a lower bound" in text and "graph_replay" in text
    # The streaming engine (tiny windows, as a large trace) gives the same summary.
    monkeypatch.setattr(summary_stream, "WINDOW_BYTES", 512)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (512,))
    streamed = summary_stream.summarize_file_stream(str(FIXTURE), label_of=lambda h: trace_label(h, FIXTURE.name))
    assert streamed is not None
    assert streamed[0].to_dict() == s.to_dict()


def _x(name, cat, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat != "kernel" else 0, "tid": 1 if cat != "kernel"
            else 7, "ts": ts, "dur": dur, "args": args}


_OUTER = {"Input Dims": [[1024, 40], []], "Input type": ["float", ""]}  # sum(x, dtype): exact, all dims
_INNER = {"Input Dims": [[1024, 40], [], [], []], "Input type": ["float", "", "Scalar", ""]}  # dims unrecorded


def test_exact_op_around_a_lower_bound_wins():
    # a100 records aten::sum(x, dtype) (exact) around aten::sum.dim_IntList without its dims (a
    # lower bound): the kernel takes the outer, exact cost, unmarked.
    from inductor_perf.costs.from_shapes import costs_and_labels

    trace = {"traceEvents": [
        _x("aten::sum", "cpu_op", 0, 20, **_OUTER), _x("aten::sum", "cpu_op", 1, 18, **_INNER),
        _x("cudaLaunchKernel", "cuda_runtime", 2, 1, correlation=9), _x("reduce_kernel", "kernel", 30, 5, correlation=9),
    ]}
    costs, labels, stats = costs_and_labels(trace)
    assert costs[3].bound is None and (costs[3].bytes_read, costs[3].bytes_written) == (163_840, 4)
    assert stats.ops_lower_bound == 0 and labels[3] == {evs.LAUNCH_OP: "aten::sum"}


def test_bound_kept_where_the_exact_op_would_not_carry_its_kernel():
    # The exact outer op also holds another costed op (aten::add_ of two [1024, 40] floats), which
    # shadows it: without the bound, the inner op's kernel would have no cost (unknown_op).
    from inductor_perf.costs.from_shapes import costs_and_labels

    add = {"Input Dims": [[1024, 40], [1024, 40], []], "Input type": ["float", "float", "Scalar"]}
    trace = {"traceEvents": [
        _x("aten::sum", "cpu_op", 0, 20, **_OUTER), _x("aten::sum", "cpu_op", 1, 8, **_INNER),
        _x("cudaLaunchKernel", "cuda_runtime", 2, 1, correlation=9), _x("aten::add_", "cpu_op", 10, 8, **add),
        _x("cudaLaunchKernel", "cuda_runtime", 11, 1, correlation=10),
        _x("reduce_kernel", "kernel", 30, 5, correlation=9), _x("add_kernel", "kernel", 40, 5, correlation=10),
    ]}
    costs, labels, stats = costs_and_labels(trace)
    assert costs[5].bound == "lower" and labels[5] == {evs.LAUNCH_OP: "aten::sum"}
    # add_: reads both tensors, writes self: 2 * 163,840 read, 163,840 written; exact
    assert costs[6].bound is None and (costs[6].bytes_read, costs[6].bytes_written) == (327_680, 163_840)
    assert stats.ops_lower_bound == 1
