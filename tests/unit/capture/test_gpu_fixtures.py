"""Real H100 captures (tests/fixtures/gpu, made by tools/gpu_zoo.py; see its README), checked on CPU:
the capture as written on the GPU, the join redone offline from the tags, and the offline CLI."""

from __future__ import annotations

import copy
import gzip
import json
import pathlib

import pytest

from inductor_perf.traces import files as tf
from inductor_perf.model import events as evs
from inductor_perf.costs.from_tags import costs_from_tags
from inductor_perf.model.tags import GraphTags

GPU = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
CASES = ("gpt_bf16", "gpt_cudagraphs", "resnet_block", "sanity")
OUR_ARGS = {evs.KERNEL_FLOP, evs.KERNEL_MATMUL_FLOP, evs.KERNEL_NUM_GB, evs.KERNEL_BYTES_READ,
            evs.KERNEL_BYTES_WRITTEN, evs.ACHIEVED_TFLOPS, evs.ACHIEVED_GBPS, evs.ACHIEVED_FLOPS_PCT,
            evs.ACHIEVED_BANDWIDTH_PCT, evs.ROOFLINE_BOUND, evs.SOURCE, evs.MODULE_PATH, evs.NODE_NAMES,
            evs.STACK_TRACE, evs.KERNEL_KIND, evs.GRAPH_ID, evs.IS_BACKWARD, evs.COST_SOURCE, evs.EAGER_OPS}


def _trace(case: str) -> dict:
    return tf.load_trace(str(GPU / f"{case}.trace.json.gz"))


def _graphs(case: str) -> dict[int, GraphTags]:
    with gzip.open(GPU / f"{case}.tags.json.gz", "rt") as f:
        return {g["instance_id"]: GraphTags.from_dict(g) for g in json.load(f)}


def _kernels(trace: dict) -> list[tuple[int, dict]]:
    return [(i, e) for i, e in enumerate(trace["traceEvents"]) if isinstance(e, dict) and e.get("cat") == "kernel"]


def _triton(trace: dict) -> list[tuple[int, dict]]:
    return [(i, e) for i, e in _kernels(trace) if e["name"].startswith("triton_")]


@pytest.mark.parametrize("case", CASES)
def test_every_triton_kernel_tagged_with_achieved_pct(case):
    triton = _triton(_trace(case))
    assert triton
    for _, e in triton:
        a = e["args"]
        assert a[evs.KERNEL_NUM_GB] > 0 and a[evs.KERNEL_FLOP] >= 0, e["name"]
        assert a[evs.ACHIEVED_BANDWIDTH_PCT] > 0 and evs.ACHIEVED_FLOPS_PCT in a, e["name"]
        assert a[evs.ROOFLINE_BOUND] in ("compute", "memory", "latency"), e["name"]
        assert a[evs.SOURCE].startswith("/") and ".py:" in a[evs.SOURCE]
        assert evs.MODULE_PATH in a


def test_cuda_graph_capture_has_replays_and_their_kernels_tagged():
    trace = _trace("gpt_cudagraphs")
    launches = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("name") == "cudaGraphLaunch"]
    assert len(launches) == 2  # forward and backward graph, one replay each
    corr = {e["args"]["correlation"] for e in launches}
    replayed = [e for _, e in _kernels(trace) if e["args"].get("correlation") in corr]
    assert len(replayed) == 49  # 17 forward + 32 backward kernels, counted in the raw trace
    assert all(evs.KERNEL_FLOP in e["args"] for e in replayed)


@pytest.mark.parametrize("case", CASES)
def test_join_redone_offline_from_the_tags_gives_the_same_costs(case):
    written = _trace(case)
    _, (costs, stats) = _rejoin(case)
    assert stats.unmatched_call_sites == 0 and stats.markers_unknown_graph == 0
    triton = {i for i, _ in _triton(written)}
    assert triton <= set(costs)
    for i, e in _kernels(written):
        if i in costs and e["name"].startswith("triton_"):
            assert costs[i].flops == e["args"][evs.KERNEL_FLOP], e["name"]
    if case == "gpt_cudagraphs":
        assert stats.graph_replay_kernels == 49


def _rejoin(case: str):
    raw = copy.deepcopy(_trace(case))
    for e in raw["traceEvents"]:
        if isinstance(e, dict) and isinstance(e.get("args"), dict):
            for k in OUR_ARGS & e["args"].keys():
                del e["args"][k]
    return raw, costs_from_tags(raw, _graphs(case).get)


@pytest.mark.parametrize("case", CASES)
def test_matmul_flops_of_the_recorded_step_equal_flop_counter(case):
    """One step was recorded; FlopCounterMode counted the same eager step on the GPU (zoo.json).
    (Joined again here: the captures were written before memsets stopped taking a share of the
    GEMM launched beside them, see test_join.)"""
    expected = json.loads((GPU / "zoo.json").read_text())[case]["eager_step_flops_flopcountermode"]
    raw, (costs, _) = _rejoin(case)
    assert sum(c.matmul_flops for c in costs.values()) == expected
    cats = {raw["traceEvents"][i].get("cat") for i, c in costs.items() if c.flops}
    assert cats == {"kernel"}


def _summary_json(path: pathlib.Path, capsys) -> dict:
    from inductor_perf.cli import main

    assert main(["summary", str(path), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_offline_summary_recognises_the_h100_and_gives_peak_percentages(capsys):
    s = _summary_json(GPU / "gpt_bf16.trace.json.gz", capsys)
    assert s["peak"]["device"] == "NVIDIA H100 SXM" and s["peak"]["mem_bandwidth_gbs"] == 3350
    assert s["flops_pct_of_peak"] > 0 and s["bandwidth_pct_of_peak"] > 0
    device_side = [e for e in _trace("gpt_bf16")["traceEvents"] if isinstance(e, dict)
                   and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    assert s["kernel_count"] == len(device_side)  # the summary counts copies and memsets as device work


def test_sanity_gemm_and_copy_reach_their_roofs(capsys):
    """An 8192^3 bf16 matmul above 60 % of the dense bf16 roof, a 1 GiB device copy above 70 % of
    HBM bandwidth: the figures a user would read in the summary's top kernels."""
    rows = {r["name"]: r for r in _summary_json(GPU / "sanity.trace.json.gz", capsys)["top_kernels"]}
    gemm = next(r for n, r in rows.items() if n.startswith("nvjet"))
    copy_ = rows["triton_poi_fused_clone_0"]
    assert gemm["bound"] == "compute" and gemm["flops_pct"] > 60
    assert copy_["bound"] == "memory" and copy_["bandwidth_pct"] > 70


def test_offline_augment_keeps_every_event(tmp_path):
    from inductor_perf.augment.core import augment_file

    src = GPU / "gpt_bf16.trace.json.gz"
    out = tmp_path / "again.json.gz"
    augment_file(str(src), str(out))
    assert len(tf.load_trace(str(out))["traceEvents"]) == len(_trace("gpt_bf16")["traceEvents"])


def test_summary_rates_a_bf16_step_against_the_bf16_roof():
    """Augmented again offline (now with kernel_dtype), the summary picks the dtype that carries the
    matmul work: bf16 for the autocast GPT block, not the fp32 default."""
    from inductor_perf.augment.core import augment_trace, device_from_trace
    from inductor_perf.summary.core import summarize

    raw, (costs, _) = _rejoin("gpt_bf16")
    device, _ = device_from_trace(raw)
    augmented, _ = augment_trace(raw, costs, device, device_events_only=True)
    s = summarize(augmented, device=device)
    assert (s.peak.dtype, s.peak.peak_tflops) == ("bfloat16", 989.5)
    # 42.4 GFLOP of matmuls in the step; the % is against 989.5 TFLOP/s, not fp32's 67
    assert s.flops_pct_of_peak == pytest.approx(100 * s.achieved_tflops / 989.5, rel=1e-3)


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_fixture_as_written_rates_its_gemms_on_the_dtype_they_ran_in(engine):
    """gpt_bf16 was written before the capture wrote kernel_dtype. Each GEMM takes its launching op's
    recorded input dtype (aten::addmm on c10::BFloat16, autocast), so the summary of the file as
    written equals that of the file joined again from its tags (which carry the dtype), and each
    one-launch GEMM's % of roof is the achieved_flops_pct the capture itself wrote beside it (against
    bf16), not six times the float32 roof with a TF32 reason."""
    from inductor_perf.augment.core import augment_trace, device_from_trace
    from inductor_perf.summary.core import summarize
    from inductor_perf.summary.files import summarize_file

    s = summarize_file(str(GPU / "gpt_bf16.trace.json.gz"), engine=engine).summary
    raw, (costs, _) = _rejoin("gpt_bf16")
    device, _ = device_from_trace(raw)
    again = summarize(augment_trace(raw, costs, device, device_events_only=True)[0], device=device)
    assert (s.peak.dtype, s.peak.peak_tflops) == (again.peak.dtype, again.peak.peak_tflops) == ("bfloat16", 989.5)
    assert s.flops_pct_of_peak == pytest.approx(again.flops_pct_of_peak, rel=1e-9)
    assert s.mfu_pct == pytest.approx(again.mfu_pct, rel=1e-9)
    written: dict[str, list[float]] = {}
    for _, e in _kernels(_trace("gpt_bf16")):
        if e["args"].get(evs.KERNEL_MATMUL_FLOP):
            written.setdefault(e["name"], []).append(e["args"][evs.ACHIEVED_FLOPS_PCT])
    rows = [r for r in s.top_kernels if len(written.get(r.name, ())) == 1 and r.count == 1]
    assert len(rows) >= 4
    for r in rows:
        assert r.dtype == "bfloat16" and r.flops_pct == pytest.approx(written[r.name][0], abs=0.05)
    assert any("carry no kernel_dtype" in n for n in s.notes)
    assert not any("carry no kernel_dtype" in n for n in again.notes)
