"""augment_trace: pure, copies only what changes, writes exactly the documented args."""

from __future__ import annotations

import copy
import json
import math
import os
from types import MappingProxyType, SimpleNamespace

import pytest
import torch

from inductor_perf.model import events as evs
from inductor_perf.augment.core import AugmentStats, EventCost, augment_file, augment_trace, costs_from_shapes
from inductor_perf.traces.files import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
UPSTREAM = os.path.join(FIXTURES, "upstream_example.json")


def fake_device(peak=100.0, bw=1000.0):
    # The fields devices.resolve.DeviceSpec exposes; a float32 matmul peak of `peak` TFLOP/s on a CPU-type
    # device (no TF32 switch) and `bw` GB/s.
    return SimpleNamespace(name="Fake-1", peak_tflops=MappingProxyType({torch.float32: peak}),
                           vector_tflops=MappingProxyType({}), mem_bandwidth_gbs=bw, peak_source="test",
                           device_type="cpu")


def small_trace():
    return {"meta": {"x": 1}, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k0", "ts": 0.0, "dur": 10.0, "args": {"keep": 1}},
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 20.0, "dur": 2.0},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 30.0, "dur": 0},
        {"ph": "i", "name": "marker", "ts": 40.0},
    ]}


COST = EventCost(flops=2_000_000, matmul_flops=2_000_000, bytes_read=30_000, bytes_written=10_000,
                 dtype=torch.float32, source="model.py:12", module_path="enc.layers.0", node_names=("mm_1", "relu_2"),
                 kind="extern", graph_id=0, is_backward=False, cost_source="tag")


def test_pure_and_shares_untouched_events():
    trace = small_trace()
    before = copy.deepcopy(trace)
    new, stats = augment_trace(trace, {0: COST}, None)
    assert trace == before  # input untouched
    assert new is not trace and new["traceEvents"] is not trace["traceEvents"]
    assert new["meta"] is trace["meta"]
    assert new["traceEvents"][1] is trace["traceEvents"][1] and new["traceEvents"][3] is trace["traceEvents"][3]
    assert new["traceEvents"][0] is not trace["traceEvents"][0]
    assert new["traceEvents"][0]["args"] is not trace["traceEvents"][0]["args"]
    assert len(new["traceEvents"]) == 4 and [e["name"] for e in new["traceEvents"]] == ["k0", "k1", "k2", "marker"]
    assert stats.events_augmented == 1 and stats.events == 4


def test_args_without_device():
    new, _ = augment_trace(small_trace(), {0: COST}, None)
    a = new["traceEvents"][0]["args"]
    # 2e6 FLOP in 10 µs = 0.2 TFLOP/s; 40,000 B in 10 µs = 4 GB/s
    assert a["keep"] == 1
    assert a[evs.KERNEL_FLOP] == 2_000_000 and a[evs.KERNEL_MATMUL_FLOP] == 2_000_000
    assert a[evs.KERNEL_NUM_GB] == pytest.approx(4e-5)
    assert (a[evs.KERNEL_BYTES_READ], a[evs.KERNEL_BYTES_WRITTEN]) == (30_000, 10_000)
    assert a[evs.ACHIEVED_TFLOPS] == pytest.approx(0.2) and a[evs.ACHIEVED_GBPS] == pytest.approx(4.0)
    assert evs.ACHIEVED_FLOPS_PCT not in a and evs.ACHIEVED_BANDWIDTH_PCT not in a
    assert a[evs.ROOFLINE_BOUND] == "unknown"
    assert a[evs.SOURCE] == "model.py:12" and a[evs.MODULE_PATH] == "enc.layers.0"
    assert a[evs.NODE_NAMES] == "mm_1, relu_2" and a[evs.KERNEL_KIND] == "extern"
    assert a[evs.GRAPH_ID] == 0 and a[evs.IS_BACKWARD] is False and a[evs.COST_SOURCE] == "tag"
    assert evs.STACK_TRACE not in a  # None values are omitted


def test_args_with_fake_device():
    new, stats = augment_trace(small_trace(), {0: COST}, fake_device())
    a = new["traceEvents"][0]["args"]
    # 0.2 of 100 TFLOP/s = 0.2 %; 4 of 1000 GB/s = 0.4 %
    assert a[evs.ACHIEVED_FLOPS_PCT] == pytest.approx(0.2)
    assert a[evs.ACHIEVED_BANDWIDTH_PCT] == pytest.approx(0.4)
    # intensity 2e6 / 4e4 = 50 FLOP/B < ridge 100e12 / 1000e9 = 100 -> left of the ridge
    assert a[evs.ROOFLINE_BOUND] in ("memory", "latency")
    assert stats.peaks_known


def test_unknown_dtype_peak_leaves_flops_pct_out():
    cost = EventCost(flops=10, matmul_flops=10, bytes_read=4, bytes_written=4, dtype=torch.float8_e5m2)
    new, _ = augment_trace(small_trace(), {0: cost}, fake_device())
    a = new["traceEvents"][0]["args"]
    assert evs.ACHIEVED_FLOPS_PCT not in a
    assert a[evs.ACHIEVED_BANDWIDTH_PCT] == pytest.approx(8 / 10 / 1e3 / 1000 * 100)


def test_zero_dur_and_missing_dur():
    trace = small_trace()
    new, stats = augment_trace(trace, {2: COST, 3: COST}, None)
    a = new["traceEvents"][2]["args"]  # dur 0: costed, no rate
    assert evs.ACHIEVED_TFLOPS not in a and a[evs.KERNEL_FLOP] == 2_000_000
    assert stats.nonpositive_dur == 1
    # no dur: skipped and counted, as every command skips an event whose times are not numbers
    assert new["traceEvents"][3] is trace["traceEvents"][3] and stats.bad_time == 1
    assert stats.events_augmented == 1


def test_triton_cost_has_no_read_write_split():
    cost = EventCost(flops=5, matmul_flops=0, bytes_read=1_000_000_000, bytes_written=0, cost_source="triton")
    a = augment_trace(small_trace(), {1: cost}, None)[0]["traceEvents"][1]["args"]
    assert a[evs.KERNEL_NUM_GB] == 1.0 and evs.KERNEL_BYTES_READ not in a and a[evs.COST_SOURCE] == "triton"


def test_never_non_finite():
    cost = EventCost(flops=10**400, matmul_flops=10**400, bytes_read=10**400, bytes_written=0, dtype=torch.float32)
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 1e-300}]}
    new, _ = augment_trace(trace, {0: cost}, fake_device())
    for v in new["traceEvents"][0]["args"].values():
        assert not (isinstance(v, float) and not math.isfinite(v))
    json.dumps(new, allow_nan=False)


def test_device_events_only_skips_cpu_ops():
    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 10.0},
                             {"ph": "X", "cat": "kernel", "ts": 0, "dur": 10.0}]}
    new, _ = augment_trace(trace, {0: COST, 1: COST}, fake_device(), device_events_only=True)
    assert evs.ACHIEVED_FLOPS_PCT not in new["traceEvents"][0]["args"]
    assert evs.ACHIEVED_FLOPS_PCT in new["traceEvents"][1]["args"]


def test_out_of_range_index_is_our_bug():
    with pytest.raises(IndexError):
        augment_trace(small_trace(), {9: COST}, None)


def test_stats_warnings_have_counts():
    s = AugmentStats(events=10, kernels_without_launch=3, unknown_dtypes=2, unknown_dtype_names=("c10::X",))
    w = s.warnings()
    assert "3 device kernels without a launching op" in w
    assert any(x.startswith("2 ops with unknown dtypes (c10::X") for x in w)


def test_stats_merge_adds_every_count():
    # every count, the TBE pairs included (once left out of the merge), adds up: 1 + 2 = 3
    a = AugmentStats(tbe_backwards_paired=1, ops_lower_bound=1, copies_costed=1, events=1)
    b = AugmentStats(tbe_backwards_paired=2, ops_lower_bound=2, copies_costed=2, events=2, worker_maxrss_kb=7)
    a.merge_from(b)
    assert (a.tbe_backwards_paired, a.ops_lower_bound, a.copies_costed, a.events) == (3, 3, 3, 3)
    assert a.worker_maxrss_kb is None  # a measurement of the run, not a count


# --- upstream's example (pytorch test/inductor/test_analysis.py, test_augment_trace_helper_unit) ----
def test_upstream_example_our_numbers():
    trace = load_trace(UPSTREAM)
    costs, _ = costs_from_shapes(trace)
    new, _ = augment_trace(trace, costs, None)
    flops = {e["name"]: e["args"].get(evs.KERNEL_FLOP) for e in new["traceEvents"] if e["cat"] == "kernel"}
    # addmm: 2 * 1 * 2048 * 1000 (the same number upstream expects)
    assert flops["void cutlass_addmm"] == 4_096_000
    # conv 1x3x224x224 * 64x3x7x7, stride 2, padding 3: 64 * 112 * 112 * 3 * 49 * 2 (INTEROP.md)
    assert flops["void convolution_kernel"] == 236_027_904
    # counted once: none of the CPU ops carries a cost in a GPU trace
    assert all(evs.KERNEL_FLOP not in e["args"] for e in new["traceEvents"] if e["cat"] == "cpu_op")


def test_upstream_example_upstream_numbers():
    pa = pytest.importorskip("torch._inductor.analysis.profile_analysis")
    out = pa._augment_trace_helper(load_trace(UPSTREAM))
    got = [e["args"].get("kernel_flop") for e in out["traceEvents"]]
    # upstream: padding-blind conv (223,552,896) on both the CPU op and the kernel
    assert got == [None, None, 4_096_000, 4_096_000, 223_552_896, 223_552_896]
    mm = {"name": "aten::mm", "args": {"Input Dims": [[256, 512], [512, 768]], "Input type": ["float", "float"],
                                       "Concrete Inputs": ["", ""]}}
    # upstream's mm bytes: twice (256*512 + 512*768 + 256*768) * 4 = 5,767,168 B, double ours
    assert pa._estimate_gb(mm) == pytest.approx(5_767_168 / 1e9)


def test_augment_file_upstream_example_gets_peaks_from_device_properties(tmp_path):
    pytest.importorskip("inductor_perf.devices.resolve")
    src = tmp_path / "u.json"
    src.write_bytes(open(UPSTREAM, "rb").read())
    stats = augment_file(src)
    out = load_trace(tmp_path / "u.augmented.json")
    k = [e for e in out["traceEvents"] if e["name"] == "void convolution_kernel"][0]["args"]
    assert k[evs.ROOFLINE_BOUND] != "unknown" and evs.ACHIEVED_FLOPS_PCT in k
    assert stats.events_augmented == 2 and stats.peaks_known


# --- augment_file's engines ----------------------------------------------------------------------
def _upstream_copy(tmp_path):
    src = tmp_path / "u.json"
    src.write_bytes(open(UPSTREAM, "rb").read())
    return src


@pytest.fixture
def stream_calls(monkeypatch):
    """The calls of the stream engine (it still runs: the spy passes them on)."""
    from inductor_perf.augment.stream import engine as fastpath

    calls, real = [], fastpath.augment_file_stream

    def spy(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(fastpath, "augment_file_stream", spy)
    return calls


@pytest.mark.parametrize("engine, fast, streams", [
    ("full", None, False), ("stream", None, True), ("auto", None, False), (None, None, False),
    (None, True, True), (None, False, False), ("stream", True, True), ("full", False, False),
])
def test_augment_file_engine_by_name(tmp_path, stream_calls, engine, fast, streams):
    # "auto" on a 10 KB file (under traces.engines.LARGE_TRACE_BYTES) is the full load; fast= is the old spelling.
    if streams:
        pytest.importorskip("orjson")
    src = _upstream_copy(tmp_path)
    reference = augment_file(src, tmp_path / "ref.json", engine="full")
    stats = augment_file(src, tmp_path / "out.json", engine=engine, fast=fast)
    assert stream_calls == ([str(src)] if streams else [])
    assert load_trace(tmp_path / "out.json") == load_trace(tmp_path / "ref.json")  # streaming keeps the layout
    assert stats == reference and stats.events_augmented == 2
    assert (stats.stage_marks != ()) == streams  # only the stream engine marks its stages


@pytest.mark.parametrize("engine", ["fast", "Stream", "", 1])
def test_augment_file_unknown_engine_names_the_valid_ones(tmp_path, engine):
    src = _upstream_copy(tmp_path)
    with pytest.raises(ValueError, match="'auto', 'full', 'stream'"):
        augment_file(src, tmp_path / "out.json", engine=engine)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("engine, fast", [("full", True), ("stream", False), ("auto", True), ("auto", False)])
def test_augment_file_engine_and_fast_disagreeing(tmp_path, engine, fast):
    src = _upstream_copy(tmp_path)
    with pytest.raises(ValueError, match="disagree"):
        augment_file(src, tmp_path / "out.json", engine=engine, fast=fast)
    assert not (tmp_path / "out.json").exists()


def test_stream_engine_falls_back_to_the_full_load(tmp_path, stream_calls):
    # NaN is not JSON: the stream engine declines and the full load writes null and counts it.
    pytest.importorskip("orjson")
    src = tmp_path / "nan.json"
    src.write_text(open(UPSTREAM).read().replace('"dur": 251.13', '"dur": NaN', 1))
    assert "NaN" in src.read_text()
    stats = augment_file(src, tmp_path / "out.json", engine="stream")
    assert stream_calls == [str(src)]
    assert stats.non_finite_inputs == 1 and stats.stage_marks == () and stats.worker_maxrss_kb is None
