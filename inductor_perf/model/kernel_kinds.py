"""What kind of work a kernel does, for the summary's time split: one vocabulary for traces of our
own compiled runs and for plain profiler traces recorded by anyone.

Two families share one split (:data:`KINDS`):

- **Inductor's**, for the kernels of our compiled graphs: ``generated`` (kernels Inductor wrote:
  ``triton_*``, ``graph_<N>_*`` or tagged ``kernel_kind="generated"``) and ``extern_matmul`` (an
  extern kernel tagged with matmul FLOPs or named for a matmul / conv / attention op, and CPU
  kernels that *are* such an aten op, ``aten::addmm``). Unchanged from before real GPU traces.
- **The launching op's**, for every other device event: ``matmul``, ``conv``, ``attention``,
  ``collective``, ``memcpy``, ``memset`` and ``other``. The op that launched the kernel decides
  (the ``launch_op`` arg the join writes: a kernel launched under ``aten::addmm`` is matmul
  whatever its name); a collective is one by its ``comm_op`` arg; copies and fills by their event
  category. Only a kernel without a launching aten op (CUDA-graph replays, lost correlation, or
  an opaque scope such as ``CompiledFunction`` or a user annotation, which says nothing of the
  kernel's kind) is classified by its name, by exact tokens of library kernel names (``cutlass``, ``*gemm``, ``xmma``,
  ``Cijk_*``, ``cudnn``, ``flash``, ``fmha``, ``nccl*``), never by substrings of a fused name:
  ``triton_poi_fused_convolution_0`` is generated, and a name rule would not call it a convolution
  either.

Pure and torch-free.

>>> kernel_kind("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>(Params)")
'matmul'
>>> kernel_kind("vectorized_elementwise_kernel", {"launch_op": "aten::addmm"})
'matmul'
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from . import events as evs

KIND_GENERATED = "generated"
KIND_EXTERN_MATMUL = "extern_matmul"
KIND_MATMUL = "matmul"
KIND_CONV = "conv"
KIND_ATTENTION = "attention"
KIND_COLLECTIVE = "collective"
KIND_MEMCPY = "memcpy"
KIND_MEMSET = "memset"
KIND_OTHER = "other"
KINDS = (KIND_GENERATED, KIND_EXTERN_MATMUL, KIND_MATMUL, KIND_CONV, KIND_ATTENTION, KIND_COLLECTIVE,
         KIND_MEMCPY, KIND_MEMSET, KIND_OTHER)
"""Every kind, in the order the split lists them."""

MATMUL_LIKE = frozenset({KIND_EXTERN_MATMUL, KIND_MATMUL, KIND_CONV, KIND_ATTENTION})
"""Kinds the per-step view counts as "matmul" (tensor-core work: GEMMs, convolutions, attention)."""

KIND_LABELS = {KIND_GENERATED: "generated", KIND_EXTERN_MATMUL: "extern matmul/conv/attn",
               KIND_MATMUL: "matmul", KIND_CONV: "conv", KIND_ATTENTION: "attention",
               KIND_COLLECTIVE: "collective", KIND_MEMCPY: "memcpy", KIND_MEMSET: "memset",
               KIND_OTHER: "other"}

_GENERATED_NAME = re.compile(r"^(graph_\d+_|triton_)")

# Exact op names (namespace "aten::" stripped) of matmul / conv / attention ops. Exact names, never
# substrings: "triton_poi_fused_convolution_0" must not count as a convolution.
_MM_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_int_mm", "_scaled_mm", "addmv", "mv",
    "dot", "vdot", "einsum", "tensordot", "_addmm_activation", "_scaled_grouped_mm",
    "_grouped_mm", "grouped_mm",  # MoE experts; transformers' fallback for them under torch.compile:
    "transformers::grouped_mm_fallback", "transformers::grouped_mm_fallback_backward",
    "mkldnn::_linear_pointwise", "mkl::_mkl_linear",
})
_CONV_OPS = frozenset({
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution_backward", "cudnn_convolution", "cudnn_convolution_transpose",
    "cudnn_convolution_relu", "cudnn_convolution_add_relu", "miopen_convolution",
    "miopen_convolution_transpose", "miopen_depthwise_convolution", "_conv_depthwise2d", "conv_tbc",
    "_convolution_mode", "mkldnn_convolution", "mkldnn::_convolution_pointwise",
    "mkldnn::_convolution_transpose_pointwise", "_slow_conv2d_forward", "_slow_conv2d_backward",
    "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d", "slow_conv_transpose2d",
    "slow_conv_transpose3d",
})
_ATTENTION_OPS = frozenset({
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward",
    "_flash_attention_backward", "_efficient_attention_forward", "_efficient_attention_backward",
    "_cudnn_attention_forward", "_cudnn_attention_backward", "flex_attention", "flex_attention_backward",
})
_OP_KINDS = {**{op: KIND_MATMUL for op in _MM_OPS}, **{op: KIND_CONV for op in _CONV_OPS},
             **{op: KIND_ATTENTION for op in _ATTENTION_OPS}}
# Record functions of collectives: "nccl:all_reduce", c10d's ops, the param-comms record.
_COMM_OP_PREFIXES = ("nccl:", "c10d::", "c10d_functional::", "_c10d_functional::", "gloo:")
# cpp_wrapper calls externs through C shims such as ``aoti_torch_cpu_addmm_out``.
_SHIM_NAME = re.compile(r"^aoti_torch_(?:cpu|cuda|xpu|mps)_(.+?)(?:_out)?$")


def _op_name(name: str) -> str:
    op = name[len("aten::"):] if name.startswith("aten::") else name
    shim = _SHIM_NAME.match(op)
    return shim.group(1) if shim else op


def is_matmul_op_name(name: str) -> bool:
    """Whether ``name`` (``aten::addmm``, ``aoti_torch_cpu_addmm_out``, ``addmm``) is a matmul,
    convolution or attention op, by exact name.

    >>> is_matmul_op_name("aten::convolution"), is_matmul_op_name("aten::conv_something_new")
    (True, False)
    """
    return _op_name(name) in _OP_KINDS


def op_kind(op: str) -> str | None:
    """The kind of the kernels an op launches: matmul, conv, attention or collective; None for any
    other op (its kernels are "other" unless their category says copy / fill).

    >>> op_kind("aten::addmm"), op_kind("nccl:all_to_all"), op_kind("aten::add_")
    ('matmul', 'collective', None)
    """
    if op.startswith(_COMM_OP_PREFIXES) or op == "record_param_comms":
        return KIND_COLLECTIVE
    return _OP_KINDS.get(_op_name(op))


# --- Names of library kernels, for kernels without a launching op ----------------------------------
_IDENT = re.compile(r"[A-Za-z0-9_]+")
_MM_TOKENS = frozenset({"cutlass", "xmma", "cublas", "cublaslt", "hipblaslt", "rocblas", "splitkreduce",
                        "gemv", "gemm"})
_CONV_TOKENS = frozenset({"fprop", "dgrad", "wgrad", "convolve", "conv2d", "conv3d", "convolution"})
_NOT_CONV_CUDNN = frozenset({"bn", "batchnorm", "norm", "rnn", "lstm", "gru", "softmax", "dropout"})
# cuDNN's fused attention (SDPA): its generated kernels (``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_...``)
# and the helpers of its backward in ``cudnn::fusion`` (``compute_dot_do_o_specialized``, the rowsum of dO x O;
# ``convert_dq_to_16bits``; ``fmha_reduce_head``), as recorded on H100 / H200 traces.
_CUDNN_ATTENTION = frozenset({"sdpa", "mha", "attention", "attn", "fusion"})


def name_kind(name: str) -> str | None:
    """The kind a library kernel's name tells, by exact tokens (identifiers split at ``_``), or None.

    >>> name_kind("ampere_sgemm_128x64_nn"), name_kind("Cijk_Ailk_Bljk_SB_MT64x64x8_SN")
    ('matmul', 'matmul')
    >>> name_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)")
    'collective'
    >>> name_kind("sm80_xmma_fprop_implicit_gemm_tf32f32"), name_kind("fused_convolution_relu_0")
    ('conv', None)
    >>> name_kind("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*)")
    'attention'
    """
    from .kernel_names import strip_args

    idents = _IDENT.findall(strip_args(name))
    if any(i.lower().startswith(("nccl", "rccl")) for i in idents):
        return KIND_COLLECTIVE
    # fbgemm is a library of embedding and quantization kernels, not GEMMs alone.
    tokens = [t.lower() for i in idents for t in i.split("_") if t and t.lower() != "fbgemm"]
    token_set = set(tokens)
    # cuDNN's own kernels (``cudnn::...``, ``cudnn_generated_...``), not a kernel that only names it
    # (``at::cuda::philox::unpack_cudnn`` unpacks a dropout seed for it)
    cudnn = any(i == "cudnn" or i.startswith("cudnn_") for i in idents)
    if any(t.startswith(("flash", "fmha")) for t in tokens) or (cudnn and token_set & _CUDNN_ATTENTION):
        return KIND_ATTENTION
    library = bool(token_set & {"cutlass", "xmma", "cudnn", "miopen", "implicit"})
    if library and any(t in _CONV_TOKENS or t.endswith(("fprop", "dgrad", "wgrad")) for t in tokens):
        return KIND_CONV
    if cudnn and not token_set & _NOT_CONV_CUDNN:
        return KIND_CONV
    if token_set & _MM_TOKENS or any(t.endswith(("gemm", "gemv")) or t.startswith(("gemm", "gemv", "cublas"))
                                     for t in tokens) or any(
            i.startswith("Cijk") for i in idents):
        return KIND_MATMUL
    return None


def kernel_kind(name: str, args: Mapping[str, Any] | None = None, cat: str = "") -> str:
    """The kind of one kernel (a key of :data:`KINDS`); see the module docstring for the rules.

    ``cat`` is the event's category (``gpu_memcpy`` / ``gpu_memset`` make memcpy / memset).

    >>> kernel_kind("graph_0_cpp_fused_convolution_0"), kernel_kind("aten::convolution")
    ('generated', 'extern_matmul')
    >>> kernel_kind("triton_poi_fused_convolution_0"), kernel_kind("Memcpy HtoD", cat="gpu_memcpy")
    ('generated', 'memcpy')
    """
    args = args or {}
    tagged = args.get(evs.KERNEL_KIND)
    if tagged == "generated":
        return KIND_GENERATED
    if tagged == "extern":
        matmul_flop = evs.number(args.get(evs.KERNEL_MATMUL_FLOP))
        if is_matmul_op_name(name) or (matmul_flop is not None and matmul_flop > 0):
            return KIND_EXTERN_MATMUL
        return KIND_OTHER
    if _GENERATED_NAME.match(name):
        return KIND_GENERATED
    if is_matmul_op_name(name):
        return KIND_EXTERN_MATMUL  # a CPU kernel that is the op itself
    if isinstance(args.get(evs.COMM_OP), str):
        return KIND_COLLECTIVE
    launch = args.get(evs.LAUNCH_OP)
    kind = op_kind(launch) if isinstance(launch, str) and launch else None
    if kind is not None:
        return kind
    c = cat.lower()
    if c in ("gpu_memcpy", "memcpy"):
        return KIND_MEMCPY
    if c in ("gpu_memset", "memset"):
        return KIND_MEMSET
    if not (isinstance(launch, str) and launch.startswith("aten::")):
        kind = name_kind(name)  # no op, or one that does not say (CompiledFunction, an annotation)
    return kind or KIND_OTHER
