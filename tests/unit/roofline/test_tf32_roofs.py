"""Float32 GEMMs that ran on TF32 tensor cores are judged against the TF32 roof (recognised from the
kernel's name, for every kernel of the op that launched it), and no kernel reads above 100 % of its
roof without the reason beside it: a hand-made trace, and the shared A100, V100 and MI250 traces
(skipped when ../shared/traces is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inductor_perf.model import events as evs
from inductor_perf.traces import files as tf
from inductor_perf.augment.core import augment_file
from inductor_perf.augment.args import device_from_trace
from inductor_perf.roofline.roofs import tf32_kernel
from inductor_perf.summary.files import summarize_file, summarize_trace
from inductor_perf.augment.in_memory import with_costs

TRACES = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"
A100 = TRACES / "a100_ranks8_r3_control.json.gz"
A100_FP32, A100_TF32 = 19.5, 156.0  # NVIDIA A100 datasheet, dense TFLOP/s


def X(name, ts, dur, cat="kernel", **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1 if cat != "kernel" else 0,
            "tid": 1 if cat != "kernel" else 7, "args": args}


def split_k_trace(gemm: str) -> dict:
    # aten::mm [1024, 1024] x [1024, 1024] float32 (2 * 1024^3 = 2,147,483,648 FLOP, 3 * 4 MiB moved:
    # 171 FLOP/B, compute-bound on an A100 at either roof) launching a GEMM (correlation 1, 30 µs) and
    # cuBLAS's split-K reduce (correlation 2, 10 µs): the op's cost is split 3:1 over them by duration.
    return {"traceEvents": [
        X("aten::mm", 0, 60, cat="cpu_op", **{"External id": 5, "Input Dims": [[1024, 1024], [1024, 1024]],
                                              "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}),
        X("cudaLaunchKernel", 2, 1, cat="cuda_runtime", correlation=1, **{"External id": 5}),
        X("cudaLaunchKernel", 4, 1, cat="cuda_runtime", correlation=2, **{"External id": 5}),
        X(gemm, 10, 30, correlation=1, **{"External id": 5}),
        X("void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>)",
          40, 10, correlation=2, **{"External id": 5}),
    ], "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "computeMajor": 8, "computeMinor": 0}]}


@pytest.mark.parametrize("name,tf32", [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)", True),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel", True),
    ("cutlass3x_sm90_tensorop_s64x128x8tf32gemm_f32_f32_f32_f32_f32_128x128x32_1x1x1_0_tnn_align4", True),
    ("Cijk_Ailk_Bljk_SS_XF32_MT64x64x16_MI32x32x4x1", True),
    ("ampere_sgemm_128x64_nn", False), ("volta_sgemm_128x32_nt", False),
    ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)", False),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1", False),
])
def test_tf32_kernel_names(name, tf32):
    assert tf32_kernel(name) is tf32


@pytest.mark.parametrize("gemm,dtype", [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)", "tf32"),
    ("ampere_sgemm_128x64_nn", "float32"),
])
def test_an_ops_kernels_share_the_roof_its_gemm_ran_on(gemm, dtype, tmp_path):
    raw = split_k_trace(gemm)
    device, _ = device_from_trace(raw)
    costed, _ = with_costs(raw, device)
    kernels = [e for e in costed["traceEvents"] if e["cat"] == "kernel"]
    assert [e["args"][evs.KERNEL_DTYPE] for e in kernels] == [dtype, dtype]  # the split-K reduce too
    assert sum(e["args"][evs.KERNEL_FLOP] for e in kernels) == 2 * 1024**3
    # 2,147,483,648 FLOP in 40 µs = 53.7 TFLOP/s: 275 % of the fp32 roof, 34.4 % of TF32's
    rows = {r.name: r for r in summarize_trace(raw).summary.all_kernels}
    gemm_row = rows[gemm]
    assert gemm_row.dtype == dtype and gemm_row.placement.compute_roof == f"{dtype} matrix"
    if dtype == "tf32":
        assert gemm_row.placement.bound == "compute"
        assert gemm_row.placement.pct_of_roof == pytest.approx(100 * 2 * 1024**3 / 40e-6 / 1e12 / A100_TF32, rel=1e-3)
        assert gemm_row.placement.above_roof_reason is None
    else:  # nothing said TF32: above the fp32 roof, and the reason names the TF32 roof it fits under
        assert gemm_row.placement.pct_of_roof > 100
        assert "TF32 tensor cores" in gemm_row.placement.above_roof_reason
    # the streaming augment and summary decide the same
    src, out = tmp_path / "raw.json", tmp_path / "aug.json"
    src.write_text(json.dumps(raw))
    augment_file(str(src), str(out))
    assert [e["args"][evs.KERNEL_DTYPE] for e in tf.load_trace(str(out))["traceEvents"] if e["cat"] == "kernel"] \
        == [dtype, dtype]
    for engine in ("full", "stream"):
        got = summarize_file(str(src), engine=engine).summary
        assert {r.name: r.dtype for r in got.all_kernels}[gemm] == dtype


@pytest.fixture(scope="module")
def a100():
    if not A100.exists():
        pytest.skip(f"{A100} absent (the shared real traces are not checked in)")
    return summarize_trace(tf.load_trace(str(A100)), top=1000)


def test_no_a100_gemm_reads_above_its_roof(a100):
    """526 of the 2,394 GEMM kernels of this trace read above 100 % of the fp32 roof (up to 572 %) when
    measured against it: each ran faster than 19.5 TFLOP/s, which only TF32 tensor cores reach. Now
    every one of them is against the TF32 roof, and none reads above any roof."""
    gemms = [e for e in a100.trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"
             and (e.get("args") or {}).get(evs.KERNEL_MATMUL_FLOP, 0) > 0]
    assert len(gemms) == 2394
    rate = {id(e): e["args"][evs.KERNEL_FLOP] / e["dur"] / 1e6 for e in gemms}  # TFLOP/s, from raw fields
    faster = [e for e in gemms if rate[id(e)] > A100_FP32]
    assert len(faster) == 526 and max(rate.values()) / A100_FP32 > 5.7
    assert {e["args"][evs.KERNEL_DTYPE] for e in faster} == {"tf32"}
    assert all(rate[id(e)] <= A100_TF32 for e in gemms)
    assert [e["name"] for e in gemms if e["args"].get(evs.ACHIEVED_FLOPS_PCT, 0) > 100] == []
    # the kernels cuBLAS names as TF32 tensor-op GEMMs are all on the TF32 roof
    assert all(e["args"][evs.KERNEL_DTYPE] == "tf32" for e in gemms if "tensorop_s1688gemm" in e["name"])
    # the headline is against the dtype carrying the most matmul FLOPs: TF32
    assert (a100.summary.peak.dtype, a100.summary.peak.peak_tflops) == ("tf32", A100_TF32)


def test_every_row_above_its_roof_says_why(a100):
    rows = a100.summary.all_kernels
    above = [r for r in rows if r.placement is not None and (r.placement.pct_of_roof or 0) > 100]
    assert all(r.placement.above_roof_reason for r in above)
    assert [r.name for r in above if r.kind in ("matmul", "extern_matmul")] == []
    # the embedding lookup above the HBM datasheet roof: its counted bytes include cache hits
    (emb,) = [r for r in above if "split_embedding_codegen_forward_unweighted_kernel" in r.name]
    assert emb.placement.level == "HBM" and "datasheet" in emb.placement.above_roof_reason
    assert "calibrate" not in emb.placement.above_roof_reason  # recorded on another machine
    # JSON and text carry the same roof and reason
    d = a100.summary.to_dict()
    row = next(r for r in d["top_kernels"] if r["name"] == emb.name)
    assert row["placement"]["above_roof_reason"] == emb.placement.above_roof_reason


@pytest.mark.parametrize("name", ["v100_ranks2_r1_test.json.gz", "mi250_minitoy_train_rocm6.json.gz"])
def test_without_tensor_core_names_fp32_gemms_keep_the_fp32_roof(name):
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} absent (the shared real traces are not checked in)")
    ct = summarize_trace(tf.load_trace(str(path)), top=1000)
    dtypes = {e["args"].get(evs.KERNEL_DTYPE) for e in ct.trace["traceEvents"]
              if isinstance(e, dict) and (e.get("args") or {}).get(evs.KERNEL_MATMUL_FLOP, 0) > 0}
    assert dtypes == {"float32"}
    above = [r for r in ct.summary.all_kernels if r.placement is not None and (r.placement.pct_of_roof or 0) > 100]
    assert all(r.placement.above_roof_reason for r in above)


def test_a_row_above_its_roof_carries_the_reason_beside_its_percentages(a100):
    """In the JSON, a kernel row's flops_pct / bandwidth_pct above 100 % have the reason in the same
    object (the binding roof's % is the larger: its placement's reason is the row's)."""
    for r in a100.summary.to_dict()["top_kernels"]:
        if max(r["flops_pct"] or 0, r["bandwidth_pct"] or 0) > 100:
            assert r["above_roof_reason"] and r["above_roof_reason"] == r["placement"]["above_roof_reason"]
    assert any(r["above_roof_reason"] for r in a100.summary.to_dict()["top_kernels"])
