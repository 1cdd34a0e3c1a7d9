"""The kind of a kernel (model/kernel_kinds.py): launching op first, a name rule only without one."""

from __future__ import annotations

import pytest

from inductor_perf.model import events as evs
from inductor_perf.model.kernel_kinds import kernel_kind, name_kind

CUTLASS = ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>("
           "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1::Params)")
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
FBGEMM = ("void fbgemm_gpu::permute_indices_weights_kernel<false, int, decltype(nullptr)>(int, int, int, "
          "int const*, decltype(nullptr) const*, int const*, int const*, int const*, int*, decltype(nullptr)*)")


@pytest.mark.parametrize("launch_op,kind", [
    ("aten::mm", "matmul"), ("aten::addmm", "matmul"), ("aten::bmm", "matmul"), ("aten::linear", "matmul"),
    ("aten::cudnn_convolution", "conv"), ("aten::convolution_backward", "conv"),
    ("aten::_scaled_dot_product_flash_attention", "attention"), ("aten::_efficient_attention_forward", "attention"),
    ("nccl:all_reduce", "collective"), ("record_param_comms", "collective"),
    ("aten::add_", "other"), ("aten::cat", "other"),
])
def test_launching_op_decides_whatever_the_name(launch_op, kind):
    # An elementwise-looking name launched by addmm (its bias) is matmul; a GEMM-looking name launched
    # by aten::add_ is not.
    assert kernel_kind(ADD, {evs.LAUNCH_OP: launch_op}) == kind
    assert kernel_kind(CUTLASS, {evs.LAUNCH_OP: launch_op}) == kind


@pytest.mark.parametrize("scope", ["CompiledFunction", "CompiledFunctionBackward", "## forward ##",
                                   "Optimizer.step#FusedAdam.step"])
def test_an_opaque_launching_scope_leaves_it_to_the_name(scope):
    # A compiled graph or an annotation says nothing of a kernel's kind (the V100 trace's GEMMs
    # run under CompiledFunction): the name decides, as without a launching op.
    assert kernel_kind(CUTLASS, {evs.LAUNCH_OP: scope}) == "matmul"
    assert kernel_kind(ADD, {evs.LAUNCH_OP: scope}) == "other"


@pytest.mark.parametrize("name,kind", [
    (CUTLASS, "matmul"),
    ("ampere_sgemm_128x64_nn", "matmul"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", "matmul"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1", "matmul"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float)", "matmul"),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16", "conv"),
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float>(float)", "conv"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)", "attention"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel::Params)", "attention"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "collective"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "collective"),
    ("void rcclKernel_Generic<4>(ncclDevComm*)", "collective"),
    (ADD, "other"),
    (FBGEMM, "other"),  # "fbgemm" is a library name, not a GEMM token
    ("fused_convolution_relu_0", "other"),  # a user's fused kernel: "convolution" alone says nothing
    # cuDNN's fused attention on an H100 / H200 (the GPT fixtures): its kernel, the helpers of its backward
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
     "attention"),
    ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)", "attention"),
    ("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)", "attention"),
    ("at::cuda::philox::unpack_cudnn(at::PhiloxCudaState, long*, long*)", "other"),  # a dropout seed, no conv
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>(float)", "conv"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(float)", "conv"),
])
def test_name_rule_without_a_launching_op(name, kind):
    assert kernel_kind(name, {}) == kind


def test_generated_kernels_stay_generated_whatever_their_name():
    assert kernel_kind("triton_poi_fused_convolution_0", {}) == "generated"
    assert kernel_kind("triton_poi_fused_convolution_0", {evs.LAUNCH_OP: "aten::convolution"}) == "generated"
    assert name_kind("triton_poi_fused_convolution_0") is None  # the name rule would not say conv either


def test_name_rule_only_without_a_launching_aten_op():
    # An aten op that is not a matmul: the GEMM-looking name does not count.
    assert kernel_kind("ampere_sgemm_128x64_nn", {evs.LAUNCH_OP: "aten::index_add_"}) == "other"
    # A library op we have no kind for (fbgemm's jagged bmm runs cuBLAS): the name says matmul.
    assert kernel_kind("ampere_sgemm_128x64_nn", {evs.LAUNCH_OP: "fbgemm::jagged_dense_bmm"}) == "matmul"


def test_collectives_copies_and_fills():
    assert kernel_kind("whatever", {evs.COMM_OP: "all_to_all"}) == "collective"
    assert kernel_kind("Memcpy HtoD (Pinned -> Device)", {}, "gpu_memcpy") == "memcpy"
    assert kernel_kind("Memset (Device)", {}, "gpu_memset") == "memset"
    assert kernel_kind("Memcpy DtoD (Device -> Device)", {evs.LAUNCH_OP: "aten::copy_"}, "gpu_memcpy") == "memcpy"


def test_tagged_kernels_keep_inductors_vocabulary():
    assert kernel_kind("sm90_xmma_gemm", {evs.KERNEL_KIND: "extern", evs.KERNEL_MATMUL_FLOP: 10}) == "extern_matmul"
    assert kernel_kind("index_kernel", {evs.KERNEL_KIND: "extern"}) == "other"
    assert kernel_kind("aten::addmm", {}) == "extern_matmul"  # a CPU kernel that is the op itself
