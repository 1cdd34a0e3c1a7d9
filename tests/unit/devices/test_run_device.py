"""One device rule for a run of our compiled graphs (devices.resolve.run_device): the capture
(capture.session.process_trace) and compare() (comparison.runner._augmented_compiled) measure the
same trace against the same peaks: the graphs' ``inductor_perf.device`` option when given, else this
machine's device of the trace's kind (its GPU when it has device kernels, else its CPU)."""

from __future__ import annotations

import copy
import json

import pytest

from inductor_perf.model import events as evs
from inductor_perf.model.markers import marker_name
from inductor_perf.model.tags import GraphTags, KernelTag, NodeInfo, TagRegistry
from inductor_perf.traces import files as tf

KERNEL = "graph_0_cpp_fused_mm_0"
FLOPS, BYTES = 2_000_000, 4_000_000  # in 10 µs: 0.2 TFLOP/s and 400 GB/s
ROW = {"name": "test cpu", "device_type": "cpu", "peak_tflops": {"float32": 1.0}, "vector_tflops": {"float32": 1.0},
       "mem_bandwidth_gbs": 1000.0}


def _registry(override=None) -> TagRegistry:
    tag = KernelTag(graph_id=0, is_backward=False, kernel_name=KERNEL, kind="generated", call_index=0,
                    nodes=(NodeInfo("mm", "aten.mm.default", None, ((100, 100), (100, 100)), ("float32", "float32")),),
                    flops=FLOPS, matmul_flops=FLOPS, bytes_read=3_000_000, bytes_written=1_000_000, source="m.py:3",
                    stack_trace=None, module_path="fc", profiler_name=KERNEL, device="cpu")
    registry = TagRegistry()
    registry.add(GraphTags(instance_id=7, graph_id=0, is_backward=False, kernels=[tag]), device_override=override)
    return registry


def _trace(gpu: bool = False) -> dict:
    def x(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}

    events = [x("user_annotation", marker_name(7, False), 0.0, 100.0), x("cpu_op", KERNEL, 10.0, 10.0)]
    if gpu:  # a device kernel of an eager op: a GPU trace, whatever machine reads it
        events += [x("cpu_op", "aten::relu", 40.0, 5.0), x("kernel", "relu_kernel", 50.0, 2.0, tid=7)]
    return {"traceEvents": events}


def _both(monkeypatch, tmp_path, registry, trace):
    """The args of our kernel's event as the capture writes them and as compare() augments them."""
    from inductor_perf.capture import session
    from inductor_perf.comparison.runner import _augmented_compiled
    from inductor_perf.model import tags

    monkeypatch.setattr(session, "REGISTRY", registry)
    monkeypatch.setattr(tags, "REGISTRY", registry)
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(trace))
    captured = tf.load_trace(session.process_trace(str(raw), str(tmp_path / "cap")).trace_path)
    compared, _ = _augmented_compiled(copy.deepcopy(trace), [])
    return [next(e["args"] for e in t["traceEvents"] if e.get("name") == KERNEL) for t in (captured, compared)]


def test_the_device_option_is_used_by_capture_and_compare(monkeypatch, tmp_path):
    captured, compared = _both(monkeypatch, tmp_path, _registry(ROW), _trace())
    for args in (captured, compared):  # 0.2 of 1 TFLOP/s, 400 of 1000 GB/s
        assert args[evs.ACHIEVED_FLOPS_PCT] == pytest.approx(20.0)
        assert args[evs.ACHIEVED_BANDWIDTH_PCT] == pytest.approx(40.0)


def test_without_an_option_both_use_this_machines_cpu(monkeypatch, tmp_path):
    from inductor_perf.devices.resolve import resolve_device

    cpu = resolve_device("cpu")
    captured, compared = _both(monkeypatch, tmp_path, _registry(), _trace())
    assert captured[evs.ACHIEVED_FLOPS_PCT] == compared[evs.ACHIEVED_FLOPS_PCT] == pytest.approx(
        100 * FLOPS / 10e-6 / 1e12 / cpu.peak_tflops["float32"])
    assert captured[evs.ACHIEVED_BANDWIDTH_PCT] == compared[evs.ACHIEVED_BANDWIDTH_PCT]


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("override", [None, ROW])
def test_both_ask_for_the_same_device(monkeypatch, tmp_path, gpu, override):
    """What each path asks resolve_device for, on a machine without CUDA as on one with it: the
    trace's kind of device and the graphs' option."""
    from inductor_perf.devices import resolve

    asked = []

    def recording(device_type="cpu", index=0, override=None, **kw):
        asked.append((device_type, override))
        return None

    monkeypatch.setattr(resolve, "resolve_device", recording)
    _both(monkeypatch, tmp_path, _registry(override), _trace(gpu))
    assert asked == [("cuda" if gpu else "cpu", override)] * 2
