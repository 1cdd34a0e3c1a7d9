"""Readable kernel names (model/kernel_names.py) on real names copied from ../shared/traces (HTA's A100,
V100 and MI250 test traces); expected spellings written by hand from the names themselves."""

from __future__ import annotations

import pytest

from inductor_perf.model.kernel_names import compact_name, fit, readable_names, short_name, strip_args

# Five different cuBLAS/CUTLASS GEMMs of a100_ranks8_r3_control.json.gz: before, a 33-character
# column read all of them as "void cutlass::Ke…_align1::Params)".
CUTLASS = [f"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_{t}>(cutlass_80_tensorop_s1688gemm_{t}::Params)"
           for t in ("64x64_32x4_nn_align1", "64x64_32x6_tn_align4", "64x64_32x4_nt_align1",
                     "64x128_32x3_tn_align1", "128x128_16x4_nt_align1")]
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
ADD2 = ADD.replace("kernel<4,", "kernel<2,")
CAT = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*, "
       "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
       "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)")
COPY = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::(anonymous "
        "namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
        "{lambda()#14}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::(anonymous "
        "namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
        "{lambda()#14}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, "
        "at::native::gpu_kernel_impl<at::native::(anonymous namespace)::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#14}::operator()() const::"
        "{lambda(float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#14}::operator()() const::"
        "{lambda(float)#1} const&)::{lambda(int)#1})")
GEMV = ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, "
        "cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)")
NCCL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"
MEMCPY = "Memcpy HtoD (Pinned -> Device)"


@pytest.mark.parametrize("name,short", [
    (CUTLASS[0], "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1"),
    (ADD, "vectorized_elementwise_kernel<CUDAFunctor_add<float>>"),
    (CAT, "CatArrayBatchedCopy<float>"),
    (COPY, "elementwise_kernel<direct_copy_kernel_cuda<float>>"),
    (NCCL, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
    (MEMCPY, MEMCPY),  # words in parentheses are not an argument list
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("triton_poi_fused_add_cos_sin_0", "triton_poi_fused_add_cos_sin_0"),
])
def test_short_names_of_real_kernels(name, short):
    assert short_name(name) == short


def test_no_void_arguments_or_namespaces():
    for name in CUTLASS + [ADD, CAT, COPY, GEMV]:
        for s in (short_name(name), compact_name(name)):
            assert not s.startswith("void ") and "::" not in s and "(" not in s, s
    assert strip_args(GEMV).endswith("float> >") and compact_name(CAT) == "CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>"


@pytest.mark.parametrize("width", [None, 60, 40, 30, 24])
def test_five_cutlass_gemms_read_differently_at_any_width(width):
    shown = readable_names(CUTLASS, width)
    assert len(set(shown.values())) == 5
    for full, s in shown.items():
        if width is not None:
            assert len(s) <= width
        assert "void" not in s and "Params" not in s
        assert s.startswith("cutlass_80")


def test_names_that_collide_are_lengthened_until_they_differ():
    # The vector width (4 vs 2) is the only difference: short names collide, the compact ones do not.
    shown = readable_names([ADD, ADD2])
    assert shown == {ADD: "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3>>",
                     ADD2: "vectorized_elementwise_kernel<2, CUDAFunctor_add<float>, Array<char*, 3>>"}
    narrow = readable_names([ADD, ADD2], 40)
    assert len(set(narrow.values())) == 2 and all(len(v) <= 40 for v in narrow.values())
    # Overloads that differ only in their argument list keep the arguments.
    a, b = "void k<float>(float*, int)", "void k<float>(float*, long)"
    assert len(set(readable_names([a, b]).values())) == 2
    # A name equal to another's short spelling.
    c, d = "k<float>", "void k<float>(int)"
    assert len(set(readable_names([c, d]).values())) == 2


def test_fit_keeps_both_ends():
    assert fit("abcdefghij", 5) == "ab…ij"
    assert fit("abc", 5) == "abc" and fit("abcdef", None) == "abcdef"
