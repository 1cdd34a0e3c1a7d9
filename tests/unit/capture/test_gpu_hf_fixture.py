"""A real transformers model captured on an H200 (tests/fixtures/gpu/hf_gpt2, see the README there),
checked on CPU: every device kernel our compiled graphs launched is tagged, the matmul FLOPs of the two
recorded steps equal FlopCounterMode's count of the eager step (measured on the GPU) twice over, and the
summary made offline gives the capture's own figures."""

from __future__ import annotations

import json
import pathlib

from inductor_perf.advice.advise import advise
from inductor_perf.model import events as evs
from inductor_perf.summary.files import summarize_file
from inductor_perf.traces import files as tf

GPU = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
TRACE = GPU / "hf_gpt2.trace.json.gz"


def _launched_in_markers(events: list) -> list[dict]:
    """Device kernels whose launch call lies inside one of our graph-call markers (found here from the
    raw nesting and correlation ids, not by the code under test)."""
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    marks = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in xs if str(e.get("name", "")).startswith("## inductor_perf graph=")]
    corr = {e["args"]["correlation"] for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")
            and "correlation" in (e.get("args") or {})
            and any(t == e["tid"] and a <= e["ts"] and e["ts"] + e["dur"] <= b for t, a, b in marks)}
    return [e for e in xs if e.get("cat") == "kernel" and (e.get("args") or {}).get("correlation") in corr]


def test_every_kernel_of_the_compiled_graphs_is_tagged():
    kernels = _launched_in_markers(tf.load_trace(str(TRACE))["traceEvents"])
    assert len(kernels) > 200  # the capture kept the device's events (244 on the GPU)
    for e in kernels:
        a = e["args"]
        assert evs.KERNEL_FLOP in a and a.get(evs.KERNEL_NUM_GB, 0) > 0, e["name"]
        assert a.get(evs.SOURCE) and a.get(evs.MODULE_PATH) is not None, e["name"]


def test_matmul_flops_of_the_recorded_steps_equal_flop_counter():
    trace = tf.load_trace(str(TRACE))
    steps = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") != "gpu_user_annotation"]  # a GPU trace repeats each range on the device
    expected = json.loads((GPU / "zoo.json").read_text())["hf_gpt2"]["eager_step_flops_flopcountermode"]
    recorded = sum(e["args"].get(evs.KERNEL_MATMUL_FLOP, 0) for e in _launched_in_markers(trace["traceEvents"]))
    assert len(steps) == 2 and recorded == 2 * expected


def test_offline_summary_gives_the_captures_figures():
    written = tf.load_trace(str(TRACE))
    record = written["inductor_perf"]
    assert record["unprofiled_step_us"] > 0 and record["unprofiled_steps"] == 1
    for engine in ("full", "stream"):
        s = summarize_file(str(TRACE), engine=engine).summary
        expected = json.loads((GPU / "zoo.json").read_text())["hf_gpt2"]["eager_step_flops_flopcountermode"]
        assert abs(s.model_flop_per_step - expected) <= 1e-5 * expected, engine  # six significant digits
        assert s.peak.device == "NVIDIA H200 SXM" and s.peak.dtype == "bfloat16", engine
        # MFU without the profiler: the same model FLOPs over the step the capture timed without it
        by_hand = 100 * expected / (record["unprofiled_step_us"] * 1e-6) / (s.peak.peak_tflops * 1e12)
        assert abs(s.mfu_unprofiled_pct - by_hand) < 1e-3, engine
        # 3 % busy under the profiler: launch-bound, told to replay CUDA graphs first
        first = advise(s)[0]
        assert first.kind == "host_bound" and "reduce-overhead" in first.fix, engine
