"""FLOPs and bytes of the common non-aten ops of recommendation-model traces (fbgemm_gpu's table
batched embeddings, their sparse-feature permutes and quantized all-to-all codecs) from the shapes
torch.profiler recorded. Torch-free.

fbgemm's ops are not in ``torch.ops.aten`` and their kernels do data-dependent gathers, so meta
tensors cannot size them: each rule below reads the op's recorded arguments by position (the
schemas of fbgemm_gpu's generated ``split_embedding_codegen_lookup_*_function`` and of its
``sparse_ops`` / ``quantize_ops``, as the profiler records them) and checks that the shapes fit
before it trusts them. docs/costs.md, "Ops of plain profiler traces", says what each rule counts.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Callable, Sequence

from ...model.events import LOWER_BOUND
from .formulas import BAD_SHAPES, NO_SHAPES, UNKNOWN_DTYPE, OpCost, Refused, parse_dtype_name, recorded

_ITEM = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "uint8": 1, "int8": 1,
         "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1, "int16": 2}


class _Args:
    """Positional tensors of one record: shape, dtype and bytes; a missing/None argument is None."""

    def __init__(self, args: dict) -> None:
        self.dims, self.types, self.concrete = recorded(args)

    def tensor(self, i: int, rank: int | None = None) -> tuple[tuple[int, ...], str] | None:
        """(shape, dtype) of tensor argument ``i``; None when it is None / not a tensor."""
        if i >= len(self.dims):
            raise Refused(BAD_SHAPES)
        t, d = self.types[i], self.dims[i]
        if t in ("", "Scalar", "ScalarList", "TensorList", "GenericList", None):
            return None
        dt = parse_dtype_name(t)
        if dt is None or dt not in _ITEM:
            raise Refused(f"{UNKNOWN_DTYPE}:{str(t)[:60]}")
        if not isinstance(d, list) or not all(type(x) is int and x >= 0 for x in d):
            raise Refused(BAD_SHAPES)
        if rank is not None and len(d) != rank:
            raise Refused(BAD_SHAPES)
        return tuple(d), dt

    def need(self, i: int, rank: int | None = None) -> tuple[tuple[int, ...], str]:
        got = self.tensor(i, rank)
        if got is None:
            raise Refused(BAD_SHAPES)
        return got

    def nbytes(self, i: int) -> int:
        got = self.tensor(i)
        return 0 if got is None else math.prod(got[0]) * _ITEM[got[1]]

    def int_value(self, i: int) -> int | None:
        if self.concrete is None or i >= len(self.concrete):
            return None
        v = self.concrete[i]
        try:
            return int(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            return None


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


# --- table batched embeddings ------------------------------------------------------------------
# Positions in split_embedding_codegen_lookup_<optimizer>_function's schema (fbgemm_gpu's codegen,
# the 29-argument form these traces record): weights, per-table layout, indices and offsets.
_DEV_W, _UVM_W, _CACHE_W = 1, 2, 3
_D_OFFSETS, _TOTAL_D = 6, 7
_INDICES, _OFFSETS, _INDICE_WEIGHTS = 11, 12, 14
_MOMENTUM_DEV, _MOMENTUM_UVM = 20, 21


def embedding_lookup_shape(a: _Args, name: str) -> tuple[int, int, int, float, str]:
    """(tables T, batch B, indices L, mean row width D, weights dtype) of a TBE forward record.

    D is ``total_D / T`` when ``total_D`` was recorded, else (row-wise optimizers keep one momentum
    value per row) weights' numel / rows, the mean over rows; exact when every table has one D."""
    if len(a.dims) != 29:
        raise Refused(BAD_SHAPES)
    d_off, _ = a.need(_D_OFFSETS, 1)
    (n_idx,), _ = a.need(_INDICES, 1)
    (n_off,), _ = a.need(_OFFSETS, 1)
    tables = d_off[0] - 1
    if tables < 1 or n_off < 1 or (n_off - 1) % tables:
        raise Refused(BAD_SHAPES)
    batch = (n_off - 1) // tables
    dev, uvm = a.tensor(_DEV_W), a.tensor(_UVM_W)
    weights = [w for w in (dev, uvm) if w is not None and _numel(w[0])]
    if not weights:
        raise Refused(BAD_SHAPES)  # a cache-only (UVM caching) table: the rows' width is not recorded
    w_dtype = weights[0][1]
    total_d = a.int_value(_TOTAL_D)
    if total_d is not None and total_d > 0:
        return tables, batch, n_idx, total_d / tables, w_dtype
    if "rowwise" not in name:
        raise Refused(NO_SHAPES)
    rows = sum(_numel(m[0]) for m in (a.tensor(_MOMENTUM_DEV), a.tensor(_MOMENTUM_UVM)) if m is not None)
    if rows < 1:
        raise Refused(BAD_SHAPES)
    return tables, batch, n_idx, sum(_numel(w[0]) for w in weights) / rows, w_dtype


def _embedding_lookup(a: _Args, name: str) -> OpCost:
    """Forward TBE: reads indices, offsets (and per-sample weights), the L gathered rows of D
    values; writes the pooled output [B, T*D] in float32 (fbgemm's default output dtype)."""
    tables, batch, n_idx, mean_d, w_dtype = embedding_lookup_shape(a, name)
    gathered = round(n_idx * mean_d)
    small = sum(a.nbytes(i) for i in (4, 5, _D_OFFSETS, 9, _INDICES, _OFFSETS, _INDICE_WEIGHTS, 16))
    out = round(batch * tables * mean_d) * 4
    weighted = a.tensor(_INDICE_WEIGHTS) is not None
    return OpCost(gathered * (2 if weighted else 1), 0, small + gathered * _ITEM[w_dtype], out, w_dtype)


def embedding_backward_cost(grad: Sequence[int], fwd_args: dict | None, name: str) -> OpCost:
    """Backward TBE with the optimizer fused in (``CppNode<SplitLookupFunction_<opt>_Op>``): reads
    the grad output [B, total_D]; with its forward record (:func:`paired_backward_cost`) also the
    indices and offsets, and reads and writes the L updated weight rows (row-wise optimizers: and
    one momentum value per row). Without the forward record: the grad alone, a lower bound."""
    grad_bytes = _numel(grad) * 4
    if fwd_args is None:
        return OpCost(0, 0, grad_bytes, 0, "float32", LOWER_BOUND)
    a = _Args(fwd_args)
    tables, batch, n_idx, mean_d, w_dtype = embedding_lookup_shape(a, name)
    if len(grad) != 2 or grad[0] != batch:
        raise Refused(BAD_SHAPES)
    mean_d = grad[1] / tables  # the grad's width is total_D: exact
    rows = round(n_idx * mean_d) * _ITEM[w_dtype]
    state = n_idx * 4 if "rowwise" in name else 0
    small = a.nbytes(_INDICES) + a.nbytes(_OFFSETS) + a.nbytes(_INDICE_WEIGHTS)
    # grad rows gathered per index, weight rows updated in place: 1 FLOP per gathered grad value
    return OpCost(round(n_idx * mean_d), 0, grad_bytes + small + rows + state, rows + state, w_dtype)


def _embedding_backward(a: _Args, name: str) -> OpCost:
    grad, dt = a.need(0, 2)
    if dt != "float32":
        raise Refused(BAD_SHAPES)
    return embedding_backward_cost(grad, None, name)


# --- permutes and codecs -------------------------------------------------------------------------
def _same_size_out(first: int, *, out_item: int | None = None, flops: bool = False) -> Callable[[_Args, str], OpCost]:
    """Reads every tensor input; writes one tensor of input ``first``'s shape (at ``out_item``
    bytes per element, default its own dtype)."""

    def cost(a: _Args, name: str) -> OpCost:
        shape, dt = a.need(first)
        read = sum(a.nbytes(i) for i in range(len(a.dims)))
        n = _numel(shape)
        return OpCost(n if flops else 0, 0, read, n * (out_item or _ITEM[dt]), dt)

    return cost


def _sparse_permute(a: _Args, name: str) -> OpCost:
    """permute_sparse_features / permute_2D_sparse_data(permute, lengths [T, B], indices, weights?):
    a full permutation (as many entries in ``permute`` as features) writes lengths, indices and
    weights again."""
    (n_perm,), _ = a.need(0, 1)
    lengths, _ = a.need(1)
    if not lengths or n_perm != lengths[0]:
        raise Refused(NO_SHAPES)  # a partial permutation: how many indices move is data-dependent
    read = sum(a.nbytes(i) for i in range(min(4, len(a.dims))))
    written = read - a.nbytes(0)
    return OpCost(0, 0, read, written, a.need(2)[1])


def _fp8_rowwise_quantize(a: _Args, name: str) -> OpCost:
    """FloatToFP8RowwiseQuantized([N, D] float): one byte per value, rows padded to 4 bytes, then
    a float scale and bias per row (fbgemm_gpu quantize_ops: ``ncols_aligned + 2 * sizeof(float)``)."""
    (n, d), dt = a.need(0, 2)
    out = n * ((d + 3) // 4 * 4 + 8)
    return OpCost(n * d, 0, n * d * _ITEM[dt], out, dt)


def _fp8_rowwise_dequantize(a: _Args, name: str) -> OpCost:
    (n, c), _ = a.need(0, 2)
    if c < 8:
        raise Refused(BAD_SHAPES)
    return OpCost(n * (c - 8), 0, n * c, n * (c - 8) * 4, "float32")


def _cumsum_complete(a: _Args, name: str) -> OpCost:
    """asynchronous_complete_cumsum([N]): writes N + 1 values; a scan counts 1 FLOP per input."""
    (n,), dt = a.need(0, 1)
    return OpCost(n, 0, n * _ITEM[dt], (n + 1) * _ITEM[dt], dt)


def _bounds_check(a: _Args, name: str) -> OpCost:
    """bounds_check_indices(rows_per_table, indices, offsets, mode, warning, weights?): reads them,
    writes nothing (it fixes bad indices in place, which a healthy run never has)."""
    return OpCost(0, 0, sum(a.nbytes(i) for i in range(len(a.dims))), 0, a.need(1)[1])


_EXACT: dict[str, Callable[[_Args, str], OpCost]] = {
    "fbgemm::permute_pooled_embs_auto_grad": _same_size_out(0),
    "fbgemm::permute_pooled_embs": _same_size_out(0),
    "fbgemm::permute_pooled_embs_auto_grad_split": _same_size_out(0),
    "fbgemm::permute_sparse_features": _sparse_permute,
    "fbgemm::permute_2D_sparse_data": _sparse_permute,
    "fbgemm::recat_embedding_grad_output_mixed_D_batch": _same_size_out(0),
    "fbgemm::recat_embedding_grad_output_mixed_D": _same_size_out(0),
    "fbgemm::recat_embedding_grad_output": _same_size_out(0),
    "fbgemm::FloatToFP8RowwiseQuantized": _fp8_rowwise_quantize,
    "fbgemm::FP8RowwiseQuantizedToFloat": _fp8_rowwise_dequantize,
    "fbgemm::FloatToHFP8Quantized": _same_size_out(0, out_item=1, flops=True),
    "fbgemm::HFP8QuantizedToFloat": _same_size_out(0, out_item=4, flops=True),
    "fbgemm::asynchronous_complete_cumsum": _cumsum_complete,
    "fb::asynchronous_complete_cumsum": _cumsum_complete,
    "fbgemm::bounds_check_indices": _bounds_check,
}
_LOOKUP_PREFIX = "fbgemm::split_embedding_codegen_lookup_"
_BACKWARD_PREFIX = "torch::autograd::CppNode<SplitLookupFunction_"
_PERMUTE_BACKWARD_PREFIX = "torch::autograd::CppNode<fbgemm_gpu::PermutePooledEmbsFunction"
TBE_PREFIXES = (_LOOKUP_PREFIX, _BACKWARD_PREFIX)
"""Name prefixes of the TBE forward ops and backward nodes (``str.startswith`` takes the tuple)."""


def ext_formula(name: str) -> Callable[[_Args, str], OpCost] | None:
    """The rule for a non-aten op name, or None."""
    rule = _EXACT.get(name)
    if rule is not None:
        return rule
    if name.startswith(_LOOKUP_PREFIX) and name.endswith("_function"):
        return _embedding_lookup
    if name.startswith(_BACKWARD_PREFIX):
        return _embedding_backward
    if name.startswith(_PERMUTE_BACKWARD_PREFIX):
        return _same_size_out(0)
    return None


def ext_cost_or_reason(name: str, args: Any) -> OpCost | str | None:
    """FLOPs and bytes of a non-aten op with a rule here; the reason when its record does not fit;
    None when there is no rule for ``name``."""
    rule = ext_formula(name)
    if rule is None:
        return None
    if not isinstance(args, dict):
        return NO_SHAPES
    try:
        return rule(_Args(args), name)
    except Refused as e:
        return e.reason
    except (TypeError, ValueError, IndexError, OverflowError):
        return BAD_SHAPES


# --- a backward TBE and its forward ------------------------------------------------------------
def embedding_forward_key(name: str) -> str | None:
    """The optimizer a TBE forward op's name spells ("rowwise_adagrad"), or None for other ops."""
    if name.startswith(_LOOKUP_PREFIX) and name.endswith("_function"):
        return name[len(_LOOKUP_PREFIX):-len("_function")]
    return None


def embedding_backward_key(name: str) -> str | None:
    """The optimizer a backward TBE node's name spells, or None for other ops."""
    if name.startswith(_BACKWARD_PREFIX) and name.endswith("_Op>"):
        return name[len(_BACKWARD_PREFIX):-len("_Op>")]
    return None


def paired_backward_cost(grad: Sequence[int], name: str, forwards: Sequence[tuple[float, str, dict]],
                         ts: float, window: int = 16) -> OpCost | None:
    """The cost of a backward TBE (``name``, grad output ``grad`` [B, total_D], started at ``ts``)
    from its forward, among the last ``window`` forwards of the same optimizer that started before it
    (``forwards``: (ts, name, args), sorted by ts). None when no forward fits clearly: the caller
    keeps the grad-only lower bound.

    Training runs each TBE module's forward, then its backward, once per step, so the latest forward
    of each module (told apart by its table count T) is the candidate; it must have the grad's B.
    The grad's width is total_D, which old traces do not record on the forward: each candidate's
    estimate T·D (D the mean row width over rows, see :func:`embedding_lookup_shape`) is compared
    with it, and the nearest wins if it is within 50 % and no other module comes within 1.5x of its
    miss. The cost then uses T and L from the forward and total_D from the grad, all exact."""
    k = bisect.bisect_left(forwards, ts, key=lambda f: f[0])  # the forwards that started before
    seen: set[int] = set()
    ranked: list[tuple[float, str, dict]] = []
    for _f_ts, f_name, f_args in reversed(forwards[max(0, k - window):k]):
        try:
            tables, batch, _n_idx, mean_d, _dt = embedding_lookup_shape(_Args(f_args), f_name)
        except (Refused, TypeError, ValueError, IndexError, ZeroDivisionError):
            continue
        if tables in seen or len(grad) != 2 or batch != grad[0] or not grad[1] > 0:
            continue
        seen.add(tables)
        ranked.append((abs(tables * mean_d - grad[1]) / grad[1], f_name, f_args))
    ranked.sort(key=lambda r: r[0])
    if not ranked or ranked[0][0] >= 0.5 or (len(ranked) > 1 and ranked[1][0] < 1.5 * ranked[0][0]):
        return None
    try:
        return embedding_backward_cost(grad, ranked[0][2], ranked[0][1])
    except (Refused, TypeError, ValueError, ZeroDivisionError):
        return None
