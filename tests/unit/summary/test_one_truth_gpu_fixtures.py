"""One truth per trace, on GPU captures and recorded device rows, without a GPU: a real H100 capture
(tests/fixtures/gpu) processed again as the capture processes it (capture.session.process_trace, the join
redone from its tags, the H100 row as resolve_device gives it there), then summarized offline from
the file it wrote; and the recorded row is what any later reader uses, never this machine's peaks."""

from __future__ import annotations

import copy
import gzip
import json
import pathlib

import pytest

from inductor_perf.advice.advise import attach
from inductor_perf.model import events as evs
from inductor_perf.traces import files as tf
from inductor_perf.devices.props import RECORD_KEY, device_record, recorded_device, spec_from_dict
from inductor_perf.devices.table import lookup
from inductor_perf.summary.files import summarize_file
from inductor_perf.model.tags import GraphTags
from json_close import IN_PROCESS_ONLY, field_diffs

GPU = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
H100 = "NVIDIA H100 80GB HBM3"
BY_NATURE = IN_PROCESS_ONLY  # the fields allowed to differ, each with its reason


def _top_field(diff: str) -> str:
    return diff.split(":")[0].split(".")[1].split("[")[0]


class _Tags:
    """What process_trace reads of the tag registry: the graphs of the capturing process."""

    def __init__(self, case: str) -> None:
        with gzip.open(GPU / f"{case}.tags.json.gz", "rt") as f:
            self.graphs = {g["instance_id"]: GraphTags.from_dict(g) for g in json.load(f)}

    def get(self, instance_id):
        return self.graphs.get(instance_id)

    def device_override(self, instance_ids):
        return None


def _raw(case: str, tmp_path: pathlib.Path) -> str:
    """The fixture's trace less every arg our capture added: the raw trace the profiler wrote."""
    raw = copy.deepcopy(tf.load_trace(str(GPU / f"{case}.trace.json.gz")))
    for e in raw["traceEvents"]:
        if isinstance(e, dict) and isinstance(e.get("args"), dict):
            for k in set(evs.ADDED_ARG_KEYS) & e["args"].keys():
                del e["args"][k]
    path = tmp_path / f"{case}.raw.json"
    path.write_text(json.dumps(raw))
    return str(path)


def _process(case: str, tmp_path: pathlib.Path, monkeypatch, tf32: bool = False):
    from inductor_perf.capture import session as capture
    from inductor_perf.devices import resolve as devices

    monkeypatch.setattr(capture, "REGISTRY", _Tags(case))
    monkeypatch.setattr(devices, "resolve_device", lambda device_type, override=None: lookup(H100))
    monkeypatch.setattr(devices, "tf32_enabled", lambda: tf32)
    return capture.process_trace(_raw(case, tmp_path), str(tmp_path / case))


@pytest.mark.parametrize("case", ["gpt_bf16", "gpt_cudagraphs", "resnet_block", "sanity"])
@pytest.mark.parametrize("engine", ["full", "stream"])
def test_gpu_capture_summary_equals_offline_summary_of_its_trace(case, engine, tmp_path, monkeypatch):
    result = _process(case, tmp_path, monkeypatch)
    written = json.loads(pathlib.Path(result.summary_json_path).read_text())
    # the offline summary as `inductor-perf summary` writes it: with the advisor's findings
    offline = attach(summarize_file(result.trace_path, engine=engine).summary).to_dict()
    assert [d for d in field_diffs(written, offline) if _top_field(d) not in BY_NATURE] == []
    assert written["findings"] == offline["findings"] and written["findings"]
    assert written["peak"]["device"] == lookup(H100).name and written["kernel_definition"] == "gpu-kernels"


def test_tf32_at_capture_is_recorded_per_kernel_and_read_back_offline(tmp_path, monkeypatch):
    """The fp32 ResNet block captured with TF32 on: its matmul kernels' roof is the TF32 peak in the
    process, in the trace's kernel_dtype args, and offline, whatever this process's switches say."""
    result = _process("resnet_block", tmp_path, monkeypatch, tf32=True)
    assert result.summary.peak.dtype == "tf32" and result.summary.peak.peak_tflops == lookup(H100).peak_tflops["tf32"]
    trace = tf.load_trace(result.trace_path)
    dtypes = {e["args"].get(evs.KERNEL_DTYPE) for e in trace["traceEvents"]
              if isinstance(e, dict) and (e.get("args") or {}).get(evs.KERNEL_MATMUL_FLOP, 0) > 0}
    assert dtypes == {"tf32"}
    offline = summarize_file(result.trace_path).summary
    assert (offline.peak.dtype, offline.peak.peak_tflops) == (result.summary.peak.dtype, result.summary.peak.peak_tflops)


def _cpu_trace(record=None) -> dict:
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1,
         "args": {"kernel_flop": 2_000_000, "kernel_matmul_flop": 2_000_000, "kernel_num_gb": 1e-4,
                  "kernel_dtype": "float32", "cost_source": "tag", "kernel_kind": "extern"}}]}
    if record is not None:
        trace[RECORD_KEY] = record
    return trace


def test_offline_summary_uses_the_recorded_row_not_this_machine(tmp_path):
    """A CPU trace recorded elsewhere: its row, as recorded (a machine that does not exist here); the
    same trace without a record: no peaks at all (this machine's would be a guess)."""
    row = lookup(H100).__class__(name="recorded elsewhere", vendor="x", device_type="cpu",
                                 peak_tflops={"float32": 1.0}, mem_bandwidth_gbs=10.0, peak_source="measured",
                                 cache_roofs=(("L2", 100.0, 1 << 20, "measured at 2026-01-01: copy"),))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_cpu_trace(device_record(row))))
    s = summarize_file(str(path)).summary
    assert (s.peak.device, s.peak.peak_tflops, s.peak.peak_source) == ("recorded elsewhere", 1.0, "measured")
    # 2 MFLOP in 10 µs = 0.2 TFLOP/s of the recorded 1 TFLOP/s
    assert s.flops_pct_of_peak == pytest.approx(20.0)
    path.write_text(json.dumps(_cpu_trace()))
    bare = summarize_file(str(path)).summary
    assert bare.peak.peak_tflops is None and bare.flops_pct_of_peak is None


def test_recorded_row_round_trips_and_a_bad_one_says_why():
    for spec in (lookup(H100), lookup("NVIDIA A100-SXM4-40GB")):
        back = spec_from_dict(json.loads(json.dumps(spec.to_dict())))
        assert back == spec and dict(back.peak_tflops) == dict(spec.peak_tflops)
    assert recorded_device({RECORD_KEY: device_record(None, "no GPU")}) == (
        None, "the capture recorded no device peaks (no GPU)")
    bad = device_record(lookup(H100))
    bad["device"]["mem_bandwidth_gbs"] = -1
    spec, note = recorded_device({RECORD_KEY: bad})
    assert spec is None and "mem_bandwidth_gbs" in note and "unreadable" in note
