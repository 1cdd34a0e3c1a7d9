"""The device-side detectors (headroom, precision, exposed_comm) on hand-built kernels against the H100
row (HBM 3350 GB/s; matmul roofs float32 67, tf32 494.5 TFLOP/s: the datasheet, devices/table.py)."""

from __future__ import annotations

import pytest
from advice_traces import kernel

from inductor_perf.advice.advise import advise
from inductor_perf.devices.table import lookup
from inductor_perf.summary.core import summarize

H100 = lookup("NVIDIA H100 80GB HBM3")


def _kinds(events: list[dict], device=H100) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in advise(summarize({"traceEvents": events}, device=device)):
        out.setdefault(f.kind, []).append(f)
    return out


def test_headroom_memory_bound_kernel_hand_arithmetic():
    # 100 µs moving 0.067 GB: 670 GB/s, 20 % of HBM's 3350; at the roof it would take 20 µs: saves 80
    k = kernel("triton_poi_fused_add_0", 0, 100, kernel_flop=0, kernel_num_gb=0.067, source="model.py:12")
    (f,) = _kinds([k])["headroom"]
    assert f.source == "model.py:12"
    assert f.saving_us_per_step == pytest.approx(80.0, abs=0.05)


def test_headroom_kernel_near_its_roof_is_quiet():
    k = kernel("triton_poi_fused_add_0", 0, 100, kernel_flop=0, kernel_num_gb=0.30, source="model.py:12")
    assert "headroom" not in _kinds([k])  # 3000 GB/s: 90 % of HBM


def test_headroom_without_a_source_line_goes_by_module_and_names_it():
    # library modules in an nn.Sequential: the kernels carry a module path and no user line. Each at
    # 20 % of HBM (0.067 GB in 100 µs): 80 µs a step at the roof, one finding per module
    events = [kernel("triton_poi_fused_add_0", 0, 100, kernel_flop=0, kernel_num_gb=0.067, module_path="0"),
              kernel("triton_poi_fused_mul_1", 200, 100, kernel_flop=0, kernel_num_gb=0.067, module_path="1")]
    got = sorted(_kinds(events)["headroom"], key=lambda f: f.module)
    assert [(f.source, f.module) for f in got] == [(None, "0"), (None, "1")]
    assert [f.saving_us_per_step for f in got] == pytest.approx([80.0, 80.0], abs=0.05)
    assert "of module 0 " in got[0].title


@pytest.mark.parametrize(("name", "channels_last"), [("aten::convolution", True),
                                                     ("sm90_xmma_fprop_implicit_gemm_f32f32", True),
                                                     ("triton_poi_fused_add_0", False),
                                                     # cuDNN's attention: "fprop" and "cudnn" in it, no conv
                                                     ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16"
                                                      "_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", False),
                                                     ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>"
                                                      "(void const*)", False)])
def test_headroom_fix_names_channels_last_for_convolutions_only(name, channels_last):
    k = kernel(name, 0, 100, kernel_flop=0, kernel_num_gb=0.067, source="model.py:12")
    (f,) = _kinds([k])["headroom"]
    assert ("channels_last" in f.fix) is channels_last
    assert "kernel table" in f.fix


@pytest.mark.parametrize("source", ["computed", "measured"])
def test_a_saving_against_computed_roofs_says_so(source):
    # a CPU at 10 GB/s: 0.0002 GB in 100 µs is 2 GB/s, 20 % of the roof (headroom 80 µs)
    cpu = {"name": "a CPU", "peak_tflops": {"float32": 0.1}, "mem_bandwidth_gbs": 10.0, "device_type": "cpu",
           "peak_source": source}
    k = kernel("cpp_fused_add_0", 0, 100, kernel_flop=0, kernel_num_gb=0.0002, source="model.py:12")
    (f,) = _kinds([k], cpu)["headroom"]
    assert f.saving_us_per_step == pytest.approx(80.0, abs=0.05)
    assert ("inductor-perf calibrate" in f.evidence) is (source == "computed")


def test_precision_fp32_gemm_hand_arithmetic():
    # 4.02 GFLOP in 100 µs: 40.2 TFLOP/s, 60 % of float32's 67 (compute-bound, no headroom finding);
    # at the same share of TF32's 494.5 it takes 100 x 67 / 494.5 µs: saves 100 x (1 - 67/494.5)
    k = kernel("sm90_xmma_gemm_f32f32_f32f32_f32_nn", 0, 100, kernel_flop=4.02e9, kernel_matmul_flop=4.02e9,
               kernel_num_gb=0.01, kernel_dtype="float32", kernel_kind="extern", source="model.py:7")
    got = _kinds([k])
    (f,) = got["precision"]
    assert f.saving_us_per_step == pytest.approx(100 * (1 - 67 / 494.5), abs=0.01)
    assert "set_float32_matmul_precision" in f.fix
    assert "headroom" not in got


def test_precision_never_without_a_faster_path():
    k = kernel("gemm", 0, 100, kernel_flop=4.02e9, kernel_matmul_flop=4.02e9, kernel_num_gb=0.01,
               kernel_dtype="float32", kernel_kind="extern")
    slow = {"name": "cpu-like", "peak_tflops": {"float32": 67.0}, "mem_bandwidth_gbs": 3350.0, "device_type": "cpu"}
    assert "precision" not in _kinds([k], slow)


def test_exposed_comm_hand_arithmetic():
    # an all-reduce 0..100 and a compute kernel 50..150: 50 µs of the collective with nothing beside it
    events = [kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 100),
              {**kernel("triton_poi_fused_mul_1", 50, 100), "tid": 8}]
    (f,) = _kinds(events)["exposed_comm"]
    assert f.saving_us_per_step == 50.0


def _rank(rank, step, comm, exposed, collectives="device"):
    from types import SimpleNamespace

    return SimpleNamespace(rank=rank, step_us=step, comm_us=comm, exposed_comm_us=exposed, collectives=collectives)


def test_job_exposed_comm_is_the_last_ranks_hand_arithmetic():
    from inductor_perf.advice.device import find_job_exposed_comm

    # rank 1 spends the least time in collectives (100 µs): it arrives last and waits for no one, so the
    # job loses its 60 µs exposed; the median step of 1000, 1000, 1200, 900 is 1000: 6 %. Rank 3 ran no
    # collective; ranks 0 and 2 expose a median (400 + 350) / 2 = 375, 315 of it waiting for rank 1
    ranks = [_rank(0, 1000, 500, 400), _rank(1, 1000, 100, 60), _rank(2, 1200, 450, 350), _rank(3, 900, 0, 0)]
    f = find_job_exposed_comm(ranks)
    assert (f.kind, f.saving_us_per_step, f.saving_pct_of_step) == ("exposed_comm", 60, 6)
    assert "rank 1" in f.title and "median 375 µs exposed" in f.evidence and "315 µs, is waiting" in f.evidence
    assert "Model: a synchronous job's step is as slow as its slowest rank" in f.evidence
    assert "gloo" not in f.evidence  # device collectives: nothing said of CPU cores
    # host collectives (gloo) share the CPU with the compute: the evidence says overlap buys less
    host = find_job_exposed_comm([_rank(0, 1000, 500, 400, "host"), _rank(1, 1000, 100, 60, "host")])
    assert host.saving_us_per_step == 60 and "host collectives (gloo)" in host.evidence
    # nothing exposed on the last rank: the others' exposed time is all waiting, nothing to overlap
    assert find_job_exposed_comm([_rank(0, 1000, 500, 400), _rank(1, 1000, 100, 0)]) is None
    assert find_job_exposed_comm([_rank(0, 1000, 0, 0)]) is None  # no collective anywhere
    # per window: the unit is said
    assert "a window" in find_job_exposed_comm([_rank(0, 1000, 500, 400), _rank(1, 1000, 100, 60)], "window").title


def test_exposed_comm_of_host_collectives_says_overlap_buys_less():
    """A CPU rank: aten::addmm 0..50 on the main thread, gloo's all-reduce 40..140 on its own thread, one
    step 0..200: 90 µs of the collective with no compute beside it, and it is a host collective."""
    op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    events = [{**op, "name": "ProfilerStep#3", "cat": "user_annotation", "ts": 0, "dur": 200},
              {**op, "name": "aten::addmm", "ts": 0, "dur": 50},
              {**op, "name": "gloo:all_reduce", "cat": "user_annotation", "tid": 2, "ts": 40, "dur": 100,
               "args": {"Input Dims": [[676]], "Input type": ["float"]}}]
    (f,) = _kinds(events, lookup("cpu"))["exposed_comm"]
    assert f.saving_us_per_step == 90 and "host collectives (gloo)" in f.evidence


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_a_ranks_exposed_comm_counts_the_steps_as_the_cross_rank_view_does(tmp_path, engine):
    """One step 0..200 (aten::addmm 0..50), gloo all-reduces on another thread at 40..140 and, after the
    step, 300..1300 (the trace went on recording): per step, 90 µs exposed in the step (140 - 50), not
    1,090 over the window; the cross-rank view reads the same 90 µs for this rank."""
    import gzip
    import json

    from inductor_perf.ranks.files import cross_rank_files
    from inductor_perf.summary.files import summarize_file

    op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    ar = {**op, "name": "gloo:all_reduce", "cat": "user_annotation", "tid": 2,
          "args": {"Input Dims": [[676]], "Input type": ["float"]}}
    events = [{**op, "name": "ProfilerStep#3", "cat": "user_annotation", "ts": 0, "dur": 200},
              {**op, "name": "aten::addmm", "ts": 0, "dur": 50},
              {**ar, "ts": 40, "dur": 100}, {**ar, "ts": 300, "dur": 1000}]
    for r in (0, 1):
        with gzip.open(tmp_path / f"rank{r}.json.gz", "wt") as f:
            json.dump({"traceEvents": events, "distributedInfo": {"rank": r, "world_size": 2, "backend": "gloo"}}, f)
    summary = summarize_file(str(tmp_path / "rank0.json.gz"), engine=engine).summary
    (f,) = [f for f in advise(summary) if f.kind == "exposed_comm"]
    assert f.saving_us_per_step == 90 and f.saving_pct_of_step == 45.0
    assert "collectives 100 µs a step within the recorded steps" in f.evidence
    view = cross_rank_files(sorted(str(p) for p in tmp_path.glob("rank*.json.gz")), workers=1).to_dict()
    assert [r["exposed_comm_us"] for r in view["ranks"]] == [90, 90]
