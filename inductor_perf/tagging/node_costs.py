"""FLOPs and bytes of FX nodes, as exact integers or sympy expressions over size symbols.

Conventions (also in docs/costs.md; the op-level rules, shared with the costs of recorded ops, are
:mod:`inductor_perf.costs.ops.convention`'s):

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
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..costs.ops.convention import REDUCTIONS, ZERO_FLOP_POINTWISE, is_own_formula, matmul_formula
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


def _op_name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", "")
    return name.split(".")[-1]


def is_reduction(node: torch.fx.Node) -> bool:
    """Whether ``node`` counts as a reduction here: 1 FLOP per input element (:func:`node_cost`)."""
    return (node.op == "call_function" and matmul_formula(node.target) is None
            and _op_name(node.target) in REDUCTIONS)


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
    formula = matmul_formula(target)
    if formula is not None:
        return NodeCost(*([_matmul_flops(formula, node)] * 2))
    name = _op_name(target)
    val = node.meta.get("val")
    if name in REDUCTIONS:
        first = node.args[0] if node.args else None
        inp = first.meta.get("val") if isinstance(first, torch.fx.Node) else None
        if isinstance(inp, torch.Tensor):
            return NodeCost(numel_of(inp), 0)
        return NodeCost(0, 0)
    if _is_pointwise(target) and name not in ZERO_FLOP_POINTWISE and isinstance(val, torch.Tensor):
        return NodeCost(numel_of(val), 0)
    return NodeCost(0, 0)


def _matmul_flops(formula: Callable[..., Any], node: torch.fx.Node) -> Expr:
    val = node.meta.get("val")
    if getattr(formula, "__wrapped__", None) is not None:
        # flop_registry's shape-level formulas (wrapped by shape_wrapper): pass shapes, not SymInt
        # tensors, so nothing is guarded.
        args, kwargs, out = tree_map(_val_to_shape, (node.args, node.kwargs, val))
        return to_expr(formula(*args, out_val=out, **kwargs))
    if is_own_formula(formula):
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
