"""FLOPs / bytes from recorded shapes, and the join that counts each cost once.

Expected FLOPs come from ../shared/INTEROP.md (hand-checked reference numbers), from hand arithmetic
in the comments, or from FlopCounterMode on the same op run live.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from inductor_perf.costs import from_shapes as oc
from inductor_perf.costs.ops import formulas as fm
from inductor_perf.traces.files import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def ev(name, dims, types, concrete=None, **kw):
    args = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    args.update(kw.pop("args", {}))
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": kw.pop("ts", 0.0),
         "dur": kw.pop("dur", 10.0), "args": args}
    e.update(kw)
    return e


def conv_event(x, w, stride, padding, dilation="[1, 1]", transposed="False", out_pad="[0, 0]", groups="1"):
    return ev("aten::convolution", [x, w, [], [], [], [], [], [], []],
              ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
              ["", "", "", stride, padding, dilation, transposed, out_pad, groups])


def live_flops(fn) -> int:
    with FlopCounterMode(display=False) as m:
        fn()
    return m.get_total_flops()


# --- reference numbers (INTEROP.md) --------------------------------------------------------------
def test_reference_conv_56():
    c = fm.op_cost("aten::convolution", conv_event([1, 3, 56, 56], [12, 3, 5, 5], "[1, 1]", "[0, 0]")["args"])
    assert c.flops == 4_867_200 and c.matmul_flops == 4_867_200


def test_reference_conv_224_padded():
    c = fm.op_cost("aten::convolution", conv_event([1, 3, 224, 224], [64, 3, 7, 7], "[2, 2]", "[3, 3]")["args"])
    assert c.flops == 236_027_904  # padding-blind formulas give 223,552,896
    # bytes: input 150528 + weight 9408 floats read, output 64*112*112 floats written
    assert (c.bytes_read, c.bytes_written) == ((150_528 + 9_408) * 4, 802_816 * 4)


def test_reference_mm_and_bytes():
    c = fm.op_cost("aten::mm", ev("aten::mm", [[256, 512], [512, 768]], ["float", "float"])["args"])
    assert c.flops == 201_326_592
    # read (256*512 + 512*768) * 4 = 2,097,152; written 256*768*4 = 786,432
    assert (c.bytes_read, c.bytes_written) == (2_097_152, 786_432)
    assert c.dtype == "float32"


def test_reference_bmm():
    c = fm.op_cost("aten::bmm", ev("aten::bmm", [[8, 256, 512], [8, 512, 768]], ["c10::BFloat16"] * 2)["args"])
    assert c.flops == 1_610_612_736
    assert c.dtype == "bfloat16"
    assert c.bytes_written == 8 * 256 * 768 * 2


def test_addmm_and_baddbmm_read_the_bias():
    c = fm.op_cost("aten::addmm", ev("aten::addmm", [[1000], [1, 2048], [2048, 1000], [], []],
                                     ["float", "float", "float", "Scalar", "Scalar"], ["", "", "", "1", "1"])["args"])
    assert c.flops == 2 * 2048 * 1000  # 4,096,000
    assert c.bytes_read == (1000 + 2048 + 2048 * 1000) * 4 and c.bytes_written == 1000 * 4
    c = fm.op_cost("aten::baddbmm", ev("aten::baddbmm", [[1, 4, 6], [2, 4, 5], [2, 5, 6]], ["double"] * 3)["args"])
    assert c.flops == 2 * 2 * 4 * 5 * 6 and c.bytes_read == (24 + 40 + 60) * 8


@pytest.mark.parametrize("x, w, kw, sig", [
    ((1, 4, 10, 10), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2), "transposed"),
    ((2, 6, 9, 11), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(2, 3), groups=3), "regular"),
    ((1, 2, 17), (5, 2, 4), dict(stride=3, padding=2), "regular"),
    ((1, 2, 5, 6, 7), (3, 2, 2, 2, 2), dict(stride=1, padding=1, dilation=2), "regular"),
])
def test_conv_variants_match_flop_counter(x, w, kw, sig):
    xt, wt = torch.randn(x), torch.randn(w)
    nd = len(x) - 2
    if sig == "transposed":
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    else:
        fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    out = fn(xt, wt, **kw)
    expected = live_flops(lambda: fn(xt, wt, **kw))

    def lst(v, d=0):
        v = kw.get(v, d)
        return str(list(v) if isinstance(v, tuple) else [v] * nd)

    e = conv_event(list(x), list(w), lst("stride", 1), lst("padding"), lst("dilation", 1),
                   str(sig == "transposed"), lst("output_padding"), str(kw.get("groups", 1)))
    c = fm.op_cost("aten::convolution", e["args"])
    assert c.flops == expected
    assert c.bytes_written == out.numel() * 4


def test_mkldnn_and_cudnn_argument_orders():
    # mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups)
    a = ev("aten::mkldnn_convolution", [[1, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], []],
           ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
           ["", "", "", "[3, 3]", "[2, 2]", "[1, 1]", "1"])["args"]
    assert fm.op_cost("aten::mkldnn_convolution", a).flops == 236_027_904
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)
    a = ev("aten::cudnn_convolution", [[1, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
           ["c10::Half", "c10::Half", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
           ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])["args"]
    c = fm.op_cost("aten::cudnn_convolution", a)
    assert c.flops == 236_027_904 and c.dtype == "float16"


def test_sdpa_hand_and_gqa():
    # q,k,v (2, 4, 64, 32): two bmms of 8 x (64x32 @ 32x64) -> 2 * 8*64*64*32*2 = 4,194,304
    d = [[2, 4, 64, 32]] * 3
    for name in ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
                 "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention"):
        c = fm.op_cost(name, ev(name, d + [[], []], ["float"] * 3 + ["Scalar", "Scalar"])["args"])
        assert c.flops == 4_194_304, name
        assert c.bytes_read == 3 * 2 * 4 * 64 * 32 * 4 and c.bytes_written == 2 * 4 * 64 * 32 * 4
    # GQA: 8 query heads over 2 kv heads: scores are per query head
    c = fm.op_cost("aten::_scaled_dot_product_efficient_attention",
                   ev("x", [[1, 8, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8]], ["float"] * 3)["args"])
    assert c.flops == 2 * (8 * 16 * 16 * 8 * 2)


@pytest.mark.parametrize("name, dims, types, reason", [
    ("aten::mm", [[4, 5], [6, 7]], ["float", "float"], fm.BAD_SHAPES),
    ("aten::mm", [[4, 5, 1], [5, 7]], ["float", "float"], fm.BAD_SHAPES),
    ("aten::mm", [[4, "5"], [5, 7]], ["float", "float"], fm.BAD_SHAPES),
    ("aten::mm", [[4, 5], [5, 7]], ["c10::Float42", "float"], "unknown_dtype:c10::Float42"),
    ("aten::mm", [[4, 5], [5, 7]], ["float"], fm.NO_SHAPES),
    ("aten::mm", [], [], fm.NO_SHAPES),
    ("aten::_scaled_dot_product_efficient_attention", [[1, 3, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8]], ["float"] * 3,
     fm.BAD_SHAPES),
])
def test_unusable_shapes_give_a_reason(name, dims, types, reason):
    assert fm.op_cost_or_reason(name, ev(name, dims, types)["args"]) == reason
    assert fm.op_cost(name, ev(name, dims, types)["args"]) is None


def test_conv_without_concrete_inputs_or_bad_params():
    e = conv_event([1, 3, 8, 8], [4, 3, 3, 3], "[1, 1]", "[0, 0]")
    del e["args"]["Concrete Inputs"]
    assert fm.op_cost_or_reason("aten::convolution", e["args"]) == fm.NO_SHAPES
    e = conv_event([1, 3, 8, 8], [4, 3, 3, 3], "[0, 1]", "[0, 0]")
    assert fm.op_cost_or_reason("aten::convolution", e["args"]) == fm.BAD_SHAPES
    e = conv_event([1, 3, 2, 2], [4, 3, 3, 3], "[1, 1]", "[0, 0]")  # kernel larger than input
    assert fm.op_cost_or_reason("aten::convolution", e["args"]) == fm.BAD_SHAPES
    e = conv_event([1, 3, 8, 8], [4, 3, 3, 3], "[1, 1]", "same")
    assert fm.op_cost_or_reason("aten::convolution", e["args"]) == fm.BAD_SHAPES


def test_dtype_strings():
    assert fm.parse_dtype("float") is torch.float32
    assert fm.parse_dtype("c10::Half") is torch.float16
    assert fm.parse_dtype("long int") is torch.int64
    assert fm.parse_dtype("c10::Float8_e4m3fn") is torch.float8_e4m3fn
    assert fm.parse_dtype("c10::complex<float>") is torch.complex64
    assert fm.parse_dtype("Scalar") is None and fm.parse_dtype(3) is None


def test_unknown_ops_are_not_costed():
    assert fm.op_cost_or_reason("aten::relu", {"Input Dims": [[3]]}) is None
    assert fm.op_cost_or_reason("cpp_fused_mm_0", {}) is None  # never guessed from a name
    assert fm.op_cost_or_reason(None, None) is None


# --- the join ------------------------------------------------------------------------------------
def test_real_cpu_trace_counts_each_op_once():
    trace = load_trace(os.path.join(FIXTURES, "cpu_eager_shapes.pt.trace.json.gz"))
    costs, stats = oc.costs_from_shapes(trace)
    evs = trace["traceEvents"]
    names = sorted(evs[i]["name"] for i, c in costs.items() if c.matmul_flops)
    # the innermost op of each nest: conv2d > convolution > _convolution > mkldnn_convolution,
    # linear > addmm (whose bias copy_ inside does not shadow it), scaled_dot_product_attention >
    # _flash_attention_for_cpu. Besides: that copy_ and the weights' normal_ init (costs.ops.meta).
    assert sorted(evs[i]["name"] for i, c in costs.items() if not c.matmul_flops) == ["aten::copy_", "aten::normal_"]
    assert names == sorted(["aten::mkldnn_convolution"] * 3 + ["aten::mm", "aten::bmm", "aten::addmm",
                            "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_convolution"])
    total = sum(c.flops for c in costs.values())
    # hand/INTEROP numbers: 4,867,200 + 201,326,592 + 1,610,612,736 + 236,027,904 + linear 4,096,000
    # + SDPA 4,194,304 + transposed conv (FlopCounterMode) 21,600 + grouped dilated conv 677,376
    assert total == 4_867_200 + 201_326_592 + 1_610_612_736 + 236_027_904 + 4_096_000 + 4_194_304 + 21_600 + 677_376
    xt, wt = torch.randn(1, 4, 10, 10), torch.randn(4, 3, 3, 3)
    assert live_flops(lambda: F.conv_transpose2d(xt, wt, stride=2, padding=1, output_padding=1, groups=2)) == 21_600
    x, w = torch.randn(1, 3, 56, 56), torch.randn(12, 1, 3, 3)
    assert live_flops(lambda: F.conv2d(x, w, padding=2, dilation=2, groups=3)) == 677_376
    assert stats.ops_without_shapes == stats.ops_bad_shapes == stats.unknown_dtypes == 0
    assert stats.ops_costed == 10


def test_cpu_int32_sum_counts_its_conversion_its_fill_and_its_reduction():
    """x.sum(dim=1) of an int32 [1024, 256] tensor, recorded eagerly on CPU (torch 2.13,
    record_shapes; names, args, start and duration in µs as recorded): torch converts x to int64
    (aten::to > _to_copy > copy_), fills the output, and reduces the int64 copy in aten::sum itself.
    The reduction's cost was shadowed by the copy_ and fill_ inside it, losing its 262,144 FLOPs."""
    recorded = [
        ("aten::sum", 0.0, 23959.1, [[1024, 256], [], [], []], ["int", "ScalarList", "Scalar", ""],
         ["", "[1]", "False", ""]),
        ("aten::as_strided", 64.6, 10.9, [[1024], [], [], []], ["long int", "ScalarList", "ScalarList", ""],
         ["", "[1024, 1]", "[1, 0]", ""]),
        ("aten::to", 88.7, 14001.2, [[1024, 256], [], [], [], []], ["int", "Scalar", "Scalar", "Scalar", ""],
         ["", "4", "False", "False", ""]),
        ("aten::_to_copy", 102.8, 13984.9, [[1024, 256], [], [], [], [], [], []],
         ["int", "Scalar", "", "", "", "Scalar", ""], ["", "4", "", "", "", "False", ""]),
        ("aten::empty_strided", 118.3, 14.0, [[], [], [], [], [], []],
         ["ScalarList", "ScalarList", "Scalar", "Scalar", "", "Scalar"], ["[1024, 256]", "[256, 1]", "4", "0", "", "False"]),
        ("aten::copy_", 145.8, 13933.0, [[1024, 256], [1024, 256], []], ["long int", "int", "Scalar"],
         ["", "", "False"]),
        ("aten::fill_", 14145.4, 13.4, [[1024, 1], []], ["long int", "Scalar"], ["", "0."]),
    ]
    trace = {"traceEvents": [ev(n, d, t, c, ts=ts, dur=dur) for n, ts, dur, d, t, c in recorded]}
    costs, stats = oc.costs_from_shapes(trace)
    got = {trace["traceEvents"][i]["name"]: (c.flops, c.bytes_read, c.bytes_written) for i, c in costs.items()}
    n = 1024 * 256
    assert got == {
        # the reduction: 1 FLOP per element, reads the int64 copy (8 B each), writes 1024 int64
        "aten::sum": (n, n * 8, 1024 * 8),
        # the conversion: reads x (4 B each), writes the int64 copy
        "aten::copy_": (0, n * 4, n * 8),
        # the output's zero fill
        "aten::fill_": (0, 0, 1024 * 8),
    }
    assert stats.ops_costed == 3


def gpu_trace(*, link="both", dup=False):
    """A GPU-shaped trace: aten::linear > aten::addmm > cudaLaunchKernel -> 2 kernels."""
    ext = 5
    add = ev("aten::addmm", [[64], [32, 128], [128, 64], [], []], ["c10::Half"] * 3 + ["Scalar"] * 2,
             ["", "", "", "1", "1"], ts=11.0, dur=20.0, args={"External id": ext})
    lin = ev("aten::linear", [[32, 128], [64, 128], [64]], ["c10::Half"] * 3, ts=10.0, dur=30.0,
             args={"External id": 4})
    rt1 = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12.0, "dur": 3.0,
           "args": {"correlation": 100, "External id": ext}}
    rt2 = dict(rt1, ts=16.0, args={"correlation": 101, "External id": ext})
    k1 = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 8.0, "args": {}}
    k2 = {"ph": "X", "cat": "kernel", "name": "splitk_reduce", "pid": 0, "tid": 7, "ts": 39.0, "dur": 1.0, "args": {}}
    events = [lin, add, rt1, rt2, k1, k2]
    if link in ("both", "args"):
        k1["args"].update({"correlation": 100, "External id": ext})
        k2["args"].update({"correlation": 101, "External id": ext})
    if link == "flows":
        events += [{"ph": "s", "cat": "ac2g", "id": 100, "pid": 1, "tid": 1, "ts": 12.0, "name": "ac2g"},
                   {"ph": "f", "cat": "ac2g", "id": 100, "pid": 0, "tid": 7, "ts": 30.0, "bp": "e", "name": "ac2g"},
                   {"ph": "s", "cat": "ac2g", "id": 101, "pid": 1, "tid": 1, "ts": 16.0, "name": "ac2g"},
                   {"ph": "f", "cat": "ac2g", "id": 101, "pid": 0, "tid": 7, "ts": 39.0, "bp": "e", "name": "ac2g"}]
    if link == "external_only":
        k1["args"]["External id"] = ext
        k2["args"]["External id"] = ext
    if dup:
        events.append(ev("aten::relu", [[3]], ["float"], ts=500.0, dur=1.0, args={"External id": ext}))
    return {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}


@pytest.mark.parametrize("link", ["both", "args", "flows", "external_only"])
def test_gpu_cost_split_over_the_kernels_by_duration(link):
    trace = gpu_trace(link=link)
    costs, stats = oc.costs_from_shapes(trace)
    assert list(costs) == [4, 5]  # the 8 µs gemm and the 1 µs reduction, not the CPU op
    # 2*32*128*64 = 524,288 split 8:1 -> 466,033.8 and 58,254.2; the leftover 1 to the larger remainder
    assert [costs[4].flops, costs[5].flops] == [466_034, 58_254] and costs[4].dtype == "float16"
    assert stats.ops_with_several_kernels == 1 and stats.kernels_without_launch == 0


def test_duplicate_external_ids_resolved_through_runtime_nesting():
    costs, stats = oc.costs_from_shapes(gpu_trace(link="both", dup=True))
    assert stats.duplicate_external_ids == 1
    # 4, 5: the gemm's two kernels (split by duration); 6: the kernel-less aten::relu (costed by costs.ops.meta)
    assert list(costs) == [4, 5, 6]


def test_duplicate_external_ids_without_correlation_are_not_guessed():
    costs, stats = oc.costs_from_shapes(gpu_trace(link="external_only", dup=True))
    assert stats.duplicate_external_ids == 1 and stats.kernels_without_launch == 2
    assert [trace_name for trace_name in costs] == [1, 6]  # falls back to the CPU op itself (and relu)


def test_kernel_without_launching_op():
    trace = gpu_trace(link="none")
    costs, stats = oc.costs_from_shapes(trace)
    assert stats.kernels_without_launch == 2
    assert list(costs) == [1]


def test_triton_launch_args_are_kept():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_0", "pid": 1, "tid": 1, "ts": 0.0, "dur": 5.0,
         "args": {"External id": 9, "kernel_flop": 1000, "kernel_num_gb": 0.5}},
        {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7, "ts": 6.0, "dur": 2.0,
         "args": {"External id": 9}},
        {"ph": "X", "cat": "kernel", "name": "triton_red_fused_1", "pid": 0, "tid": 7, "ts": 9.0, "dur": 2.0,
         "args": {"kernel_flop": 7, "kernel_num_gb": 0.25}},
    ]}
    costs, stats = oc.costs_from_shapes(trace)
    assert sorted(costs) == [1, 2]
    assert costs[1].flops == 1000 and costs[1].bytes_read == 500_000_000 and costs[1].cost_source == "triton"
    assert costs[2].flops == 7 and costs[2].bytes_read == 250_000_000


def test_ops_without_shapes_counted_once_per_nest():
    trace = load_trace(os.path.join(FIXTURES, "cpu_eager_shapes.pt.trace.json.gz"))
    for e in trace["traceEvents"]:
        e.get("args", {}).pop("Input Dims", None)
    costs, stats = oc.costs_from_shapes(trace)
    assert costs == {}
    # 8 nests (4-deep conv nests, linear>addmm, sdpa>flash) and aten::randn (every aten op has a
    # cost rule now: costs.ops.meta) -> 9, not one per op
    assert stats.ops_without_shapes == 9


# --- our formulas equal torch.utils.flop_counter's ----------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.utils import flop_counter as fcm  # noqa: E402

_dim = st.integers(1, 64)


def _unwrapped(fn):
    return getattr(fn, "__wrapped__", fn)


@settings(max_examples=200, deadline=None)
@given(_dim, _dim, _dim, _dim)
def test_mm_and_bmm_flops_equal_flop_counter(b, m, k, n):
    assert fm.mm_flops((m, k), (k, n)) == _unwrapped(fcm.mm_flop)((m, k), (k, n))
    assert fm.bmm_flops((b, m, k), (b, k, n)) == _unwrapped(fcm.bmm_flop)((b, m, k), (b, k, n))
    with pytest.raises(ValueError):
        fm.mm_flops((m, k), (k + 1, n))
    with pytest.raises(ValueError):
        fm.bmm_flops((b, m, k), (b + 1, k, n))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.booleans(),
       st.lists(st.tuples(st.integers(1, 12), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2),
                          st.integers(1, 2)), min_size=1, max_size=3))
def test_conv_flops_equal_flop_counter(n, c_in_per_group, c_out_per_group, groups, transposed, spatial):
    # Shapes and output sizes as PyTorch's conv / conv_transpose docs define them; spatial entries are
    # (input size, kernel, stride, padding, dilation). Live FlopCounterMode runs agree (tests above).
    x = [n, c_in_per_group * groups, *(s[0] for s in spatial)]
    ks = [s[1] for s in spatial]
    if transposed:
        w = [x[1], c_out_per_group, *ks]
        out_sp = [(i - 1) * st_ - 2 * p + d * (k - 1) + 1 for i, k, st_, p, d in spatial]
        out = [n, c_out_per_group * groups, *out_sp]
    else:
        w = [c_out_per_group * groups, c_in_per_group, *ks]
        out_sp = [(i + 2 * p - d * (k - 1) - 1) // st_ + 1 for i, k, st_, p, d in spatial]
        out = [n, w[0], *out_sp]
    if any(o < 1 for o in out_sp):
        return
    ref = _unwrapped(fcm.conv_flop)(x, w, None, [s[2] for s in spatial], [s[3] for s in spatial],
                                    [s[4] for s in spatial], transposed, out_shape=out)
    assert fm.conv_flops(x, w, out, transposed) == ref


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 64), st.integers(1, 64),
       st.integers(1, 32), st.integers(1, 32))
def test_sdpa_flops_equal_flop_counter(b, h_kv, group, s_q, s_k, d, d_v):
    q, k, v = (b, h_kv * group, s_q, d), (b, h_kv, s_k, d), (b, h_kv, s_k, d_v)
    # GQA costs what attention over key/value heads repeated to the query's count costs (torch
    # 2.11's sdpa_flop_count takes equal head counts only).
    k_rep, v_rep = (b, h_kv * group, s_k, d), (b, h_kv * group, s_k, d_v)
    assert fm.sdpa_flops(q, k, v) == _unwrapped(fcm.sdpa_flop_count)(q, k_rep, v_rep)
    with pytest.raises(ValueError):
        fm.sdpa_flops(q, (b, h_kv, s_k, d + 1), v)


def test_attributing_does_not_import_flop_counter():
    import subprocess
    import sys

    code = ("import sys; from inductor_perf.costs import from_shapes as op_costs;"
            "from inductor_perf.costs.ops import formulas as fm;"
            "c = fm.op_cost('aten::mm', {'Input Dims': [[2, 3], [3, 4]], 'Input type': ['float', 'float']});"
            "assert c.flops == 48, c; print('torch.utils.flop_counter' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_dtype_name_table_matches_torch():
    # The torch-free table must give, for every profiler spelling, the dtype torch itself names
    # (torch.<attr>, or the profiler's C++ / c10:: spelling of it) and that dtype's itemsize.
    cpp = {"float": torch.float32, "double": torch.float64, "c10::Half": torch.float16,
           "c10::BFloat16": torch.bfloat16, "long int": torch.int64, "int": torch.int32,
           "short int": torch.int16, "signed char": torch.int8, "unsigned char": torch.uint8,
           "c10::complex<float>": torch.complex64, "c10::Float8_e4m3fn": torch.float8_e4m3fn}
    torch_names = {n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)}
    assert torch_names <= set(fm._DTYPE_NAMES)  # every torch dtype attribute is known by name
    newer = {"bcomplex32"}  # dtypes of a newer torch than the one installed may be missing
    for key, (name, size) in fm._DTYPE_NAMES.items():
        dt = getattr(torch, key, None) if key in torch_names else cpp.get(key, getattr(torch, name, None))
        if dt is None and name in newer:
            continue
        assert isinstance(dt, torch.dtype), key
        assert (str(dt).removeprefix("torch."), dt.itemsize) == (name, size), key
    assert fm.parse_dtype_name("c10::BFloat16") == "bfloat16" and fm.parse_dtype_name("Scalar") is None
