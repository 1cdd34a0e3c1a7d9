"""The FLOP convention of one aten op, shared by the compile-time tags (:mod:`inductor_perf.tagging.node_costs`:
FX nodes, sizes as sympy expressions) and the costs of recorded ops (:mod:`.meta`: meta tensors):

* **Matmul FLOPs** (mm, addmm, bmm, baddbmm, convolution and its backward, attention) use
  ``torch.utils.flop_counter.flop_registry`` - the same formulas as FlopCounterMode - plus our own
  formulas for ops it lacks (:func:`matmul_formula`): CPU flash attention forward/backward, grouped
  matmuls (MoE experts: ``aten._grouped_mm`` and transformers' ``grouped_mm_fallback``) and the
  mkldnn/mkl ops that freezing produces.
* **Elementwise FLOPs**: every pointwise aten op counts 1 FLOP per output element, except those of
  :data:`ZERO_FLOP_POINTWISE` (pure data movement and selection); the :data:`REDUCTIONS` count 1 FLOP
  per input element.

(docs/costs.md states the whole convention.) Imports torch: callers import this module when they
cost an op, never at package import.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

Expr = Any  # int or sympy.Expr


# --- formulas flop_counter lacks ------------------------------------------------------------------
def _linear_like(x_shape: Sequence[Expr], out_shape: Sequence[Expr]) -> Expr:
    # out[..., N] = x[..., K] @ w[K, N]: 2*K FLOPs per output element.
    return 2 * math.prod(out_shape) * x_shape[-1]


def _first_out(out_shape: Any) -> Any:
    if isinstance(out_shape, (list, tuple)) and out_shape and isinstance(out_shape[0], (list, tuple)):
        return out_shape[0]
    return out_shape


def _mkldnn_linear_flop(x_shape, *args, out_shape=None, **kwargs) -> Expr:
    return _linear_like(x_shape, _first_out(out_shape))


def _mkldnn_linear_binary_flop(x_shape, other_shape, *args, out_shape=None, **kwargs) -> Expr:
    return _linear_like(x_shape, _first_out(out_shape))


def _mkl_linear_flop(x_shape, *args, out_shape=None, **kwargs) -> Expr:
    return _linear_like(x_shape, _first_out(out_shape))


def _mkldnn_conv_flop(x_shape, w_shape, bias, padding, stride, dilation, groups, *args,
                      out_shape=None, **kwargs) -> Expr:
    from torch.utils.flop_counter import conv_flop_count

    return conv_flop_count(x_shape, w_shape, _first_out(out_shape), transposed=False)


def _mkldnn_conv_binary_flop(x_shape, other_shape, w_shape, *args, out_shape=None, **kwargs) -> Expr:
    from torch.utils.flop_counter import conv_flop_count

    return conv_flop_count(x_shape, w_shape, _first_out(out_shape), transposed=False)


def _mkldnn_conv_transpose_flop(x_shape, w_shape, *args, out_shape=None, **kwargs) -> Expr:
    from torch.utils.flop_counter import conv_flop_count

    # Prepacked transposed weights are stored as (in, out/groups, *k); conv_flop_count's transposed
    # branch multiplies by both channel counts, so the layout order does not matter.
    return conv_flop_count(x_shape, w_shape, _first_out(out_shape), transposed=True)


def _cpu_flash_fwd_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> Expr:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(q_shape, k_shape, v_shape)


def _cpu_flash_bwd_flop(grad_out_shape, q_shape, k_shape, v_shape, *args, out_shape=None,
                        **kwargs) -> Expr:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad_out_shape, q_shape, k_shape, v_shape)


def _grouped_mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> Expr:
    """Grouped matmul (MoE experts): every output element is a K-long dot product, 2 FLOPs per
    multiply-add, ``K = a[-1]``; for two 2-D operands (the weight gradient: groups split K, the
    output stacks one (M, N) block per group) the groups' K add up to ``a[1]``."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    return 2 * math.prod(_first_out(out_shape)) * a_shape[-1]


def _grouped_mm_bwd_flop(input_shape, weight_shape, offs_shape, grad_out_shape, *args, out_shape=None,
                         **kwargs) -> Expr:
    """Backward of a 2-D x 3-D grouped matmul: the input and the weight gradient, each as many
    FLOPs as the forward (``2 * rows * K * N``)."""
    return 2 * (2 * input_shape[0] * input_shape[-1] * grad_out_shape[-1])


# Ops outside aten whose FLOPs their inputs determine, by qualified name (their namespace may be
# registered after our first compile): transformers' grouped matmul, which its MoE layers call under
# torch.compile where torch's own grouped_mm is not supported (float32).
_NAMED_FORMULAS: dict[str, Callable[..., Expr]] = {
    "transformers::grouped_mm_fallback": _grouped_mm_flop,
    "transformers::grouped_mm_fallback_backward": _grouped_mm_bwd_flop,
}


def _extra_formulas() -> dict[Any, Callable[..., Expr]]:
    aten = torch.ops.aten
    table: dict[Any, Callable[..., Expr]] = {
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_fwd_flop,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_bwd_flop,
    }
    for name in ("_grouped_mm", "grouped_mm"):  # torch.nn.functional.grouped_mm (MoE experts)
        packet = getattr(aten, name, None)
        if packet is not None:
            table[packet] = _grouped_mm_flop
    mkldnn = getattr(torch.ops, "mkldnn", None)
    if mkldnn is not None:
        for name, fn in (("_linear_pointwise", None), ("_convolution_pointwise", None),
                         ("_convolution_pointwise_", None),
                         ("_convolution_transpose_pointwise", _mkldnn_conv_transpose_flop),
                         ("_qlinear_pointwise", None)):
            try:
                packet = getattr(mkldnn, name)
            except (AttributeError, RuntimeError):
                continue
            if fn is not None:
                table[packet] = fn
                continue
            if name.startswith("_linear"):
                table[packet] = _mkldnn_linear_flop
            else:
                table[packet] = _mkldnn_conv_flop
    try:
        table[torch.ops.mkl._mkl_linear] = _mkl_linear_flop
    except (AttributeError, RuntimeError):
        pass
    return table


_EXTRA: dict[Any, Callable[..., Expr]] | None = None


def _extras() -> dict[Any, Callable[..., Expr]]:
    global _EXTRA
    if _EXTRA is None:
        _EXTRA = _extra_formulas()
    return _EXTRA


def matmul_formula(target: Any) -> Callable[..., Expr] | None:
    """The matmul-FLOP formula for an OpOverload, or None when it is not a matmul-like op."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    from torch.utils.flop_counter import flop_registry

    packet = target.overloadpacket
    if packet in flop_registry:
        return flop_registry[packet]
    fn = _extras().get(packet) or _NAMED_FORMULAS.get(getattr(packet, "_qualified_op_name", ""))
    if fn is None:
        return None
    # mkldnn binary variants take an extra "other" tensor before the weight.
    if target._overloadname == "binary" and fn is _mkldnn_linear_flop:
        return _mkldnn_linear_binary_flop
    if target._overloadname == "binary" and fn is _mkldnn_conv_flop:
        return _mkldnn_conv_binary_flop
    return fn


def is_matmul_op(target: Any) -> bool:
    return matmul_formula(target) is not None


def is_own_formula(formula: Callable[..., Any]) -> bool:
    """Whether ``formula`` (from :func:`matmul_formula`) is one of ours rather than flop_registry's:
    ours take shapes and the output's shape as ``out_shape=``."""
    return (formula in _extras().values() or formula in _NAMED_FORMULAS.values()
            or formula in (_mkldnn_linear_binary_flop, _mkldnn_conv_binary_flop))


# --- elementwise convention -----------------------------------------------------------------------
ZERO_FLOP_POINTWISE = {
    "clone", "copy", "copy_", "_to_copy", "convert_element_type", "lift_fresh_copy", "where",
    "masked_fill", "fill", "fill_", "full_like", "zeros_like", "ones_like", "empty_like",
    "scalar_tensor", "alias", "detach", "_assert_tensor_metadata", "device_put",
}
REDUCTIONS = {
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "var_mean",
    "std", "std_mean", "logsumexp", "any", "all", "cumsum", "cumprod", "logcumsumexp", "nansum",
    "norm", "linalg_vector_norm",
}
