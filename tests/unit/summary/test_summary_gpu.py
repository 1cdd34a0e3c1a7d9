"""summarize() on GPU traces as other people record them: per-step view, Busy shares that never
exceed 100 %, what is not costed, raw traces costed in memory. Expected numbers by hand next to each
trace; the shared real traces (../shared/traces) are checked against their own fields."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from inductor_perf.model import events as evs
from inductor_perf.augment.core import augment_file, device_from_trace
from inductor_perf.cli import main
from inductor_perf.comparison.runner import diff_files
from inductor_perf.report.text import format_summary
from inductor_perf.summary.core import summarize
from inductor_perf.augment.in_memory import with_costs
from inductor_perf.model.events import is_costed
from inductor_perf.traces.files import load_trace

TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES",
                             Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"))
A100 = TRACES / "a100_ranks8_r3_control.json.gz"
MI250 = TRACES / "mi250_minitoy_train_rocm6.json.gz"


def X(name, ts, dur, cat="kernel", pid=0, tid=7, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        ev["args"] = args
    return ev


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared real traces (../shared/traces) are not on this machine")
    return path


# --- per-step view -------------------------------------------------------------------------------
def step_trace():
    # Step 1 [0, 100): a GEMM (launched by aten::mm) [10, 40) on stream 7, an add [50, 70) on stream 7,
    # an all-reduce [30, 60) on stream 8. Matmul = [10, 40) = 30; other = [50, 70) = 20; comm = the
    # all-reduce where nothing else runs, [40, 50) = 10; busy = [10, 70) = 60; idle 40. Sum 100.
    # Step 2 [100, 150): a memcpy [110, 140) = 30 (other); an all-reduce [145, 160) clipped to
    # [145, 150) = 5 (comm); busy 35 of 50 = 70 %; idle 30 %. Step 1 is the slowest.
    return {"traceEvents": [
        X("ProfilerStep#1", 0, 100, cat="user_annotation", pid=1, tid=1),
        X("ProfilerStep#2", 100, 50, cat="user_annotation", pid=1, tid=1),
        X("ProfilerStep#1", 0, 100, cat="gpu_user_annotation", pid=0, tid=9),  # device copy: ignored
        X("ampere_sgemm_128x64_nn", 10, 30, launch_op="aten::mm"),
        X("vectorized_elementwise_kernel", 50, 20, launch_op="aten::add"),
        X("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 30, 30, tid=8),
        X("Memcpy HtoD (Pinned -> Device)", 110, 30, cat="gpu_memcpy"),
        X("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 145, 15, tid=8),
    ]}


def test_steps_by_hand():
    s = summarize(step_trace())
    assert [r.name for r in s.steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    one, two = s.steps
    assert (one.dur_us, one.busy_us, one.kernel_count) == (100, 60, 3)
    assert (one.busy_pct, one.matmul_pct, one.other_pct, one.comm_pct, one.idle_pct) == (60, 30, 20, 10, 40)
    assert (two.busy_pct, two.matmul_pct, two.other_pct, two.comm_pct, two.idle_pct) == (70, 0, 60, 10, 30)
    assert two.start_us == 100 and two.kernel_count == 2
    assert s.slowest_step == "ProfilerStep#1"
    assert any("slowest step: ProfilerStep#1" in n for n in s.notes)
    for out in (format_summary(s, "text"), format_summary(s, "markdown")):
        assert "* ProfilerStep#1" in out and "Comm" in out
    d = json.loads(format_summary(s, "json"))
    assert d["steps"][0]["comm_pct"] == 10 and d["slowest_step"] == "ProfilerStep#1"


def test_no_steps_without_profiler_step_annotations():
    s = summarize({"traceEvents": [X("k", 0, 10)]})
    assert s.steps == [] and s.slowest_step is None
    assert "Steps" not in format_summary(s, "text")


# --- Busy shares ---------------------------------------------------------------------------------
def test_busy_share_is_a_union_never_above_100():
    # Two 10 µs kernels of module "a" on two streams, both [0, 10): summed time 20 µs, busy 10 µs.
    # Before: "Busy 200.0 %"; the union of the row's kernels is 10 µs = 100 % of busy.
    # Module "b": [20, 25) on stream 7 -> busy total [0, 10) + [20, 25) = 15; a = 10/15, b = 5/15.
    s = summarize({"traceEvents": [
        X("k1", 0, 10, module_path="a", source="m.py:1"), X("k1", 0, 10, tid=8, module_path="a", source="m.py:1"),
        X("k2", 20, 5, module_path="b", source="m.py:2")]})
    assert s.busy_us == 15
    mods = {r.key: r.share_of_busy_pct for r in s.modules}
    assert mods == {"a": pytest.approx(66.667, abs=1e-3), "b": pytest.approx(33.333, abs=1e-3)}
    assert {r.key: r.share_of_busy_pct for r in s.lines}["m.py:1"] == pytest.approx(66.667, abs=1e-3)
    assert {r.name: r.share_of_busy_pct for r in s.top_kernels}["k1"] == pytest.approx(66.667, abs=1e-3)
    text = format_summary(s, "text")
    assert "union" in text  # the footnote says what the % is of


def test_busy_share_of_every_kernel_is_100_at_epoch_timestamps():
    # Kineto's timestamps are microseconds since an epoch: at 1.7e12 a double's step is 2^-12 us, so
    # (ts + 1.76) - ts is 1.760009765625, not 1.76. The busy window once summed such differences, and
    # the row of this one kernel read 99.999 % of it (100.013 % on the A100 example trace); both now
    # add the durations themselves.
    ts = 1.7e12
    assert (ts + 1.76) - ts != 1.76  # the premise, in this float arithmetic
    s = summarize({"traceEvents": [X("k", ts, 1.76, module_path="a", source="m.py:1")]})
    assert s.busy_us == pytest.approx(1.76, abs=1e-9)
    assert ([r.share_of_busy_pct for r in s.top_kernels] + [r.share_of_busy_pct for r in s.modules]
            + [r.share_of_busy_pct for r in s.lines]) == [100.0, 100.0, 100.0]
    # two overlapping kernels and a third apart: each span's first duration plus each extension
    s = summarize({"traceEvents": [X("k", ts, 1.76, module_path="a"), X("k", ts + 1.0, 1.76, tid=8, module_path="a"),
                                   X("j", ts + 10.0, 0.5, module_path="b")]})
    assert s.busy_us == pytest.approx(1.76 + 1.0 + 0.5, abs=1e-3)  # [0, 2.76) + [10, 10.5)
    assert {r.key: r.share_of_busy_pct for r in s.modules}["a"] <= 100.0


# --- what is not costed --------------------------------------------------------------------------
def test_uncosted_rows_with_reasons_and_hints():
    # Costed: the GEMM (10 µs). Not costed: aten::add's kernel (20 µs, no shapes), a kernel without a
    # launching op in a trace whose others have one (5 µs). Costed share 10 / 35 = 28.571 %.
    s = summarize({"traceEvents": [
        X("gemm", 0, 10, launch_op="aten::mm", kernel_flop=100, kernel_num_gb=1e-6),
        X("add_kernel", 10, 20, launch_op="aten::add", not_costed="no_shapes"),
        X("replayed_kernel", 30, 5),
    ]})
    assert s.costed_time_pct == pytest.approx(28.571, abs=1e-3)
    rows = [(r.op, r.kernel, r.reason, r.total_us, r.count) for r in s.uncosted]
    assert rows == [("aten::add", "add_kernel", "no_shapes", 20, 1), (None, "replayed_kernel", "no_launch_op", 5, 1)]
    assert "record_shapes=True" in s.uncosted[0].hint and "CUDA-graph" in s.uncosted[1].hint
    text, md = format_summary(s, "text"), format_summary(s, "markdown")
    for out in (text, md):
        assert "28.6 %" in out and "no_shapes" in out and "record_shapes=True" in out
    assert json.loads(format_summary(s, "json"))["uncosted"][0]["reason"] == "no_shapes"


def test_collective_with_a_bus_bandwidth_counts_as_costed():
    s = summarize({"traceEvents": [X("ncclKernel_AllReduce", 0, 10, comm_op="all_reduce", busbw_gbps=80.0),
                                   X("k", 10, 10)]})
    assert s.costed_time_pct == 50.0
    assert s.time_split_us["collective"] == 10


# --- raw traces are costed in memory, with augment's own code ------------------------------------
def raw_mm_trace():
    # aten::mm [128, 256] x [256, 512] float32 launching one kernel (correlation 7), by hand:
    # FLOPs 2*128*256*512 = 33_554_432; bytes (128*256 + 256*512 + 128*512) * 4 = 917_504.
    return {"traceEvents": [
        X("ProfilerStep#3", 0, 50, cat="user_annotation", pid=1, tid=1),
        X("aten::mm", 10, 20, cat="cpu_op", pid=1, tid=1,
          **{"External id": 5, "Input Dims": [[128, 256], [256, 512]], "Input type": ["float", "float"],
             "Concrete Inputs": ["", ""]}),
        X("cudaLaunchKernel", 15, 2, cat="cuda_runtime", pid=1, tid=1, correlation=7, **{"External id": 5}),
        X("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>(Params)", 30, 8,
          correlation=7, **{"External id": 5}),
    ], "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}]}


def test_raw_trace_costed_in_memory_equals_augment_then_summary(tmp_path):
    raw = raw_mm_trace()
    assert not is_costed(raw)
    costed, note = with_costs(raw, device_from_trace(raw)[0])
    assert "computed from recorded shapes" in note
    assert not is_costed(raw)  # the input is left as it was
    s = summarize(costed, costs_note=note)
    assert s.flop == 33_554_432
    assert s.gb == pytest.approx(917_504 / 1e9)
    assert s.time_split_pct["matmul"] == 100.0
    src, out = tmp_path / "raw.json", tmp_path / "aug.json"
    src.write_text(json.dumps(raw))
    augment_file(src, out)
    aug = load_trace(out)
    assert with_costs(aug)[1] is None  # already costed: nothing to compute
    a, b = summarize(costed).to_dict(), summarize(aug).to_dict()
    assert a == b


def test_cli_summary_and_diff_of_a_raw_trace(tmp_path, capsys):
    p = tmp_path / "raw.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(raw_mm_trace(), f)
    assert main(["summary", str(p), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["flop"] == 33_554_432 and "computed from recorded shapes" in d["costs_note"]
    assert main(["summary", str(p)]) == 0
    out = capsys.readouterr().out
    assert "computed from recorded shapes" in out and "33.6 MFLOP" in out
    top = out[out.index("\nTop kernels") + 1:]  # the table, not a finding's see: line
    name = top.splitlines()[3].split("  ")[0]  # the name fitted to the room the numbers leave
    assert name.startswith("cutlass_80_tens") and name.endswith("nn_align1") and len(name) >= 24
    assert "void cutlass" not in out
    q = tmp_path / "raw2.json"
    q.write_text(json.dumps(raw_mm_trace()))
    c = diff_files(p, q, by="op")
    assert sum("computed from recorded shapes" in n for n in c.notes) == 2


def test_device_note_in_the_header():
    s = summarize(step_trace(), device_note="recognised from properties (sm_80, 108 SMs, 40 GB) → "
                                            "NVIDIA A100 SXM4 40GB")
    for fmt in ("text", "markdown", "json"):
        assert "recognised from properties (sm_80, 108 SMs, 40 GB)" in format_summary(s, fmt)


# --- the shared real traces ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def a100():
    raw = load_trace(need(A100))
    device, device_note = device_from_trace(raw)
    costed, note = with_costs(raw, device)
    return raw, summarize(costed, device=device, device_note=device_note, costs_note=note)


def test_real_a100_raw_summary_shows_matmul_flops_and_steps(a100):
    raw, s = a100
    # GEMMs (cutlass / ampere_sgemm / cuBLAS gemv) are matmul: before this they were all "other".
    assert s.time_split_pct["matmul"] > 10
    # Every kernel launched by aten::mm / addmm / bmm is matmul, whatever its name (the bias add of
    # addmm included); the trace says which op launched each through augment's launch_op.
    from inductor_perf.model.kernel_kinds import kernel_kind
    from inductor_perf.augment.in_memory import with_costs

    costed, _ = with_costs(raw)
    gemm_kernels = [e for e in costed["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"
                    and (e.get("args") or {}).get(evs.LAUNCH_OP) in ("aten::mm", "aten::addmm", "aten::bmm")]
    assert len(gemm_kernels) > 100
    assert {kernel_kind(e["name"], e["args"], e["cat"]) for e in gemm_kernels} == {"matmul"}
    assert s.time_split_pct["collective"] > 20  # nccl kernels
    assert s.flop > 0 and s.costs_note and "recorded shapes" in s.costs_note
    assert 0 < s.costed_time_pct <= 100
    # The trace's own ProfilerStep ranges: six steps, the slowest the longest of them.
    steps = {e["name"]: e["dur"] for e in raw["traceEvents"]
             if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"}
    assert [r.name for r in s.steps] == sorted(steps)
    assert s.slowest_step == max(steps, key=steps.get)
    for r in s.steps:
        assert r.dur_us == steps[r.name]
        parts = (r.matmul_pct, r.other_pct, r.comm_pct, r.idle_pct)
        assert all(0 <= p <= 100 for p in parts) and sum(parts) == pytest.approx(100, abs=0.01)
        assert r.matmul_pct > 0
    shares = ([r.share_of_busy_pct for r in s.top_kernels] + [r.share_of_busy_pct for r in s.modules]
              + [r.share_of_busy_pct for r in s.lines])
    assert all(0 < p <= 100 for p in shares)
    assert all(0 <= p <= 100 for p in s.time_split_pct.values())


def test_real_a100_text_names_and_width(a100):
    _, s = a100
    text = format_summary(s, "text")
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "void " not in text and "::Params" not in text
    table = text[text.index("\nTop kernels") + 1:text.index("\nSteps (")]  # the tables, not see: lines
    names = [line.split("  ")[0] for line in table.splitlines()[3:] if line and not line.startswith(" ")]
    assert len(names) == len(set(names)) == 20
    # JSON keeps the full names.
    assert any(r["name"].startswith("void cutlass::Kernel<") for r in json.loads(format_summary(s, "json"))["top_kernels"])


def test_real_a100_raw_summary_equals_augmented_summary(a100, tmp_path):
    _, s = a100
    out = tmp_path / "a100.augmented.json.gz"
    augment_file(need(A100), out)
    aug = load_trace(out)
    device, device_note = device_from_trace(aug)
    t = summarize(aug, device=device, device_note=device_note).to_dict()
    d = s.to_dict()
    assert d.pop("costs_note") and t.pop("costs_note") is None
    assert d == t


def test_real_mi250_rocm_gemms_are_matmul():
    raw = load_trace(need(MI250))
    s = summarize(with_costs(raw)[0])
    assert s.time_split_pct["matmul"] > 0  # Cijk_* (rocBLAS / hipBLASLt)
    assert s.time_split_pct["memcpy"] > 0
