"""FLOPs and bytes of FX nodes, as exact integers or sympy expressions over size symbols.

Conventions (also in docs/costs.md):

* **Matmul FLOPs** (mm, addmm, bmm, baddbmm, convolution and its backward, attention) use
  ``torch.utils.flop_counter.flop_registry`` - the same formulas as FlopCounterMode - plus our own
  formulas for ops it lacks: CPU flash attention forward/backward, grouped matmuls (MoE experts:
  ``aten._grouped_mm`` and transformers' ``grouped_mm_fallback``) and the mkldnn/mkl ops that
  freezing produces.
* **Elementwise FLOPs**: every pointwise aten op (``torch.Tag.pointwise``) counts 1 FLOP per output
  element, except pure data movement and selection (copies, dtype conversion, ``where``, fills),
  which count 0. Reductions (sum, mean, amax, var_mean, ...) count 1 FLOP per input element.
  Everything else (views, cat, gather, index, sort, ...) counts 0.
* ``flops`` = matmul part + elementwise part.

Shapes are passed to the registry's formulas as tuples of ints or sympy expressions, never as
SymInts: evaluating a SymInt (``int()``, ``bool()``, ``==``) would add a guard and make Dynamo
recompile at the next size, which plain Inductor would not do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..costs.ops.formulas import SCATTER_WRITES, scatter_accumulates
from ..model.tags import Quantity, SizeExpr

Expr = Any  # int or sympy.Expr


def to_expr(x: Any) -> Expr:
    """An int or sympy expression for an int-like value (SymInt -> its expression, no guard)."""
    if isinstance(x, torch.SymInt):
        expr = x.node.expr
        return int(expr) if expr.is_number else expr
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    try:  # sympy expressions pass through
        import sympy

        if isinstance(x, sympy.Basic):
            return int(x) if x.is_number else x
    except ImportError:  # pragma: no cover - sympy ships with torch
        pass
    return x


def to_quantity(x: Expr) -> Quantity:
    """The tag form: an int, or the text of a sympy expression as a :class:`~inductor_perf.model.tags.SizeExpr`."""
    x = to_expr(x)
    if isinstance(x, int):
        return x
    return SizeExpr(str(x))


def shape_of(t: Any) -> tuple[Expr, ...]:
    return tuple(to_expr(s) for s in t.shape)


def numel_of(t: Any) -> Expr:
    return math.prod(shape_of(t)) if t.dim() else 1


def tensor_bytes(t: Any) -> Expr:
    return numel_of(t) * t.dtype.itemsize


def _val_to_shape(x: Any) -> Any:
    """FX arg -> what the registry's shape-level formulas expect (tensors become shape tuples)."""
    if isinstance(x, torch.fx.Node):
        x = x.meta.get("val")
    if isinstance(x, torch.Tensor):
        return shape_of(x)
    if isinstance(x, (torch.SymInt, int)) and not isinstance(x, bool):
        return to_expr(x)
    return x


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


def _overload_formula(target: Any) -> Callable[..., Expr] | None:
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
    return _overload_formula(target) is not None


# --- elementwise convention -----------------------------------------------------------------------
_ZERO_FLOP_POINTWISE = {
    "clone", "copy", "copy_", "_to_copy", "convert_element_type", "lift_fresh_copy", "where",
    "masked_fill", "fill", "fill_", "full_like", "zeros_like", "ones_like", "empty_like",
    "scalar_tensor", "alias", "detach", "_assert_tensor_metadata", "device_put",
}
_REDUCTIONS = {
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "var_mean",
    "std", "std_mean", "logsumexp", "any", "all", "cumsum", "cumprod", "logcumsumexp", "nansum",
    "norm", "linalg_vector_norm",
}


def _op_name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", "")
    return name.split(".")[-1]


def is_reduction(node: torch.fx.Node) -> bool:
    """Whether ``node`` counts as a reduction here: 1 FLOP per input element (:func:`node_cost`)."""
    return (node.op == "call_function" and _overload_formula(node.target) is None
            and _op_name(node.target) in _REDUCTIONS)


def _is_pointwise(target: Any) -> bool:
    tags = getattr(target, "tags", ())
    return torch.Tag.pointwise in tags


@dataclass(frozen=True)
class NodeCost:
    flops: Expr
    matmul_flops: Expr


def node_cost(node: torch.fx.Node) -> NodeCost:
    """FLOPs of one FX node under the conventions of this module."""
    if node.op != "call_function":
        return NodeCost(0, 0)
    target = node.target
    formula = _overload_formula(target)
    if formula is not None:
        return NodeCost(*([_matmul_flops(formula, node)] * 2))
    name = _op_name(target)
    val = node.meta.get("val")
    if name in _REDUCTIONS:
        first = node.args[0] if node.args else None
        inp = first.meta.get("val") if isinstance(first, torch.fx.Node) else None
        if isinstance(inp, torch.Tensor):
            return NodeCost(numel_of(inp), 0)
        return NodeCost(0, 0)
    if _is_pointwise(target) and name not in _ZERO_FLOP_POINTWISE and isinstance(val, torch.Tensor):
        return NodeCost(numel_of(val), 0)
    return NodeCost(0, 0)


def _matmul_flops(formula: Callable[..., Any], node: torch.fx.Node) -> Expr:
    val = node.meta.get("val")
    if getattr(formula, "__wrapped__", None) is not None:
        # flop_registry's shape-level formulas (wrapped by shape_wrapper): pass shapes, not SymInt
        # tensors, so nothing is guarded.
        args, kwargs, out = tree_map(_val_to_shape, (node.args, node.kwargs, val))
        return to_expr(formula(*args, out_val=out, **kwargs))
    if formula in _extras().values() or formula in _NAMED_FORMULAS.values() \
            or formula in (_mkldnn_linear_binary_flop, _mkldnn_conv_binary_flop):
        args, kwargs, out = tree_map(_val_to_shape, (node.args, node.kwargs, val))
        return to_expr(formula(*args, out_shape=out, **kwargs))
    # Raw registry formulas (GPU flash/efficient attention) read tensors themselves.
    args, kwargs = tree_map(lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a,
                            (node.args, node.kwargs))
    return to_expr(formula(*args, out_val=val, **kwargs))


def node_io_bytes(node: torch.fx.Node) -> tuple[Expr, Expr]:
    """(bytes read, bytes written) of an FX node called as an extern kernel: tensor inputs plus
    outputs, each tensor counted once."""
    seen: set[int] = set()
    read: Expr = 0
    flat, _ = tree_flatten((node.args, node.kwargs))
    for a in flat:
        if isinstance(a, torch.fx.Node) and id(a) not in seen:
            seen.add(id(a))
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                read = read + tensor_bytes(v)
    written: Expr = 0
    outs, _ = tree_flatten(node.meta.get("val"))
    for v in outs:
        if isinstance(v, torch.Tensor):
            written = written + tensor_bytes(v)
    return read, written


def scatter_io_bytes(node: torch.fx.Node, name: str) -> tuple[Expr, Expr] | None:
    """(bytes read, bytes written) of the in-place scatter-like op ``name`` (``index_put_``,
    ``scatter_reduce_``, ...: :data:`~inductor_perf.costs.ops.formulas.SCATTER_WRITES`) called as an extern
    kernel on the arguments of FX node ``node`` (the op or its functional form, which Inductor
    reinplaced): every argument but ``self`` read, and as many elements of ``self`` written as the
    source argument has, read too when the op accumulates - as recorded ops are costed. None when
    ``name`` is not such an op or the node's arguments do not fit it."""
    rule = SCATTER_WRITES.get(name)
    schema = getattr(node.target, "_schema", None)
    if rule is None or schema is None:
        return None
    args: dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        args[a.name] = node.args[i] if i < len(node.args) else node.kwargs.get(a.name, a.default_value)
    self_val = getattr(args.get("self"), "meta", {}).get("val")
    if not isinstance(self_val, torch.Tensor) or rule[0] not in args:
        return None
    read: Expr = 0
    seen: set[int] = set()
    for key, value in args.items():
        flat, _ = tree_flatten(value)
        for a in flat:
            v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if key != "self" and isinstance(v, torch.Tensor) and id(a) not in seen:
                seen.add(id(a))
                read = read + tensor_bytes(v)
    src, _ = tree_flatten(args[rule[0]])
    count = sum((numel_of(a.meta["val"]) for a in src
                 if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)), 0)
    written = count * self_val.dtype.itemsize
    if scatter_accumulates(rule, args):
        read = read + written
    return read, written
