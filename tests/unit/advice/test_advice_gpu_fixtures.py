"""The advisor on our own H100 captures (tests/fixtures/gpu, README there) and on the real traces of
../shared/traces: the launch-bound GPT step is told to use CUDA graphs; the one already replaying CUDA
graphs is not, and is pointed at the eager work outside them; both engines give the same findings."""

from __future__ import annotations

import gzip
import json

import pytest
from engine_inputs import FIXTURES, GPU_FIXTURES, SHARED, TRACES

from inductor_perf.advice.advise import advise
from inductor_perf.summary.files import summarize_file

GPU = FIXTURES / "gpu"


def _findings(path, engine="full"):
    return advise(summarize_file(str(path), engine=engine).summary)


def test_launch_bound_gpt_gets_reduce_overhead():
    found = _findings(GPU / "gpt_bf16.trace.json.gz")
    ro = [f for f in found if f.kind == "host_bound" and 'mode="reduce-overhead"' in f.fix]
    assert len(ro) == 1
    # the device is busy 3.5 % of the 8.14 ms window: the launch gaps inside the compiled calls are a
    # large share of it, and it ranks among the first findings
    assert ro[0].saving_pct_of_step > 20
    assert ro[0] in found[:3]


def test_cuda_graphs_gpt_is_pointed_at_the_eager_work():
    found = _findings(GPU / "gpt_cudagraphs.trace.json.gz")
    assert not [f for f in found if "reduce-overhead" in f.fix + f.title]
    (eager,) = [f for f in found if f.kind == "host_bound"]
    assert eager is found[0]
    assert "outside the CUDA graphs" in eager.title
    for part in ("loss", "optimizer", "copies"):
        assert part in eager.fix
    # what the host did meanwhile: the loss's backward and the optimizer step, named in the evidence
    assert "MeanBackward0" in eager.evidence and "Optimizer.step#SGD.step" in eager.evidence


@pytest.mark.parametrize("name", ["gpt_bf16", "gpt_cudagraphs", "hf_gpt2"])
def test_a_model_without_convolutions_is_not_told_channels_last(name):
    # the GPT steps ran no convolution op (read from the trace's own op names); their attention kernels
    # (cuDNN's sdpa ..._flash_fprop_..., cudnn::fusion::...) once read as convolutions by substring
    path = GPU / f"{name}.trace.json.gz"
    with gzip.open(path) as f:
        ops = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"}
    assert ops and not [op for op in ops if "conv" in op.lower()]
    found = _findings(path)
    assert [f for f in found if f.kind == "headroom"]
    assert not [f.source for f in found if "channels_last" in f.fix]


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_gpu_fixtures_same_findings_both_engines(name):
    pytest.importorskip("orjson")
    full = [f.to_dict() for f in _findings(GPU / name, "full")]
    assert [f.to_dict() for f in _findings(GPU / name, "stream")] == full


@pytest.mark.parametrize("name", [*SHARED, "cpu_only_rank34.json.gz"])  # (a CPU trace: both engines read it in memory)
def test_shared_traces_same_findings_both_engines(name):
    pytest.importorskip("orjson")
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{p} absent (the shared real traces are not checked in)")
    full = [f.to_dict() for f in _findings(p, "full")]
    assert [f.to_dict() for f in _findings(p, "stream")] == full
    for f in full:  # never a saving larger than the step it is a share of
        assert f["saving_pct_of_step"] is None or f["saving_pct_of_step"] <= 100.0
