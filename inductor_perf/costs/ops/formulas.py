"""FLOPs and bytes of one aten op from the shapes torch.profiler recorded (``record_shapes=True``):
the formula of each op, and the profiler's dtype spellings they read.

FLOPs follow ``torch.utils.flop_counter``'s shape-level formulas (re-stated here so attribution
never imports it; a test checks they agree), so our counts equal ``flop_registry`` (and
``FlopCounterMode``) for the same op. Bytes are the op's tensor inputs
plus its output(s), each at its recorded dtype: the traffic of a kernel that reads every input
once and writes every output once.

Conventions carried over from flop_registry: a multiply-add is 2 FLOPs, bias adds are not
counted, attention counts the two matmuls and ignores causal masking. Which event of a trace gets
each cost is :mod:`inductor_perf.costs.from_shapes`.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...model.events import LOWER_BOUND

log = logging.getLogger(__name__)

ATEN_PREFIX = "aten::"

# Why an op got no cost; the stats count the first reason of each op group.
NO_SHAPES = "no_shapes"
BAD_SHAPES = "bad_shapes"
UNKNOWN_DTYPE = "unknown_dtype"
UNKNOWN_OP = "unknown_op"

# In-place ops that write only the elements of one argument into ``self`` (scatter-like): they move
# that argument's element count, not all of ``self``. Value: the argument, and whether they also read
# the elements they update (accumulate): always, never, or as the named bool argument says. The one
# rule for recorded ops (costs.ops.meta) and for the extern kernels of compiled graphs
# (tagging.node_costs.scatter_io_bytes).
SCATTER_WRITES: dict[str, tuple[str, bool | str]] = {
    "index_put_": ("values", "accumulate"), "_index_put_impl_": ("values", "accumulate"),
    "index_copy_": ("source", False), "index_add_": ("source", True), "scatter_": ("src", False),
    "scatter_add_": ("src", True), "scatter_reduce_": ("src", True), "masked_scatter_": ("source", False),
    "index_reduce_": ("source", True),
}


# Reductions that compute in their result's dtype by converting their input first
# (``self.to(out_dtype)`` in torch's reduction setup, recorded as its own ``aten::to`` and costed
# there): their own kernel reads that copy, e.g. 8 B per element for the int64 sum of an int32
# tensor. True: except a float16/bfloat16 input summed into float32, which the CUDA kernels read as
# is (CPU converts it too; a record does not say its device, so the GPU case counts).
_CONVERTING_REDUCTIONS = {"sum": True, "nansum": True, "prod": True, "mean": True, "cumsum": False,
                          "cumprod": False}


def reads_converted_input(name: str, in_dtype: str, out_dtype: str) -> bool:
    """Whether reduction ``name`` (``sum``, ``cumsum``, ...) of an ``in_dtype`` input into an
    ``out_dtype`` result reads its input converted to ``out_dtype`` (dtype names as torch spells them).

    >>> reads_converted_input("sum", "int32", "int64"), reads_converted_input("sum", "bfloat16", "float32")
    (True, False)
    """
    lowp_kept = _CONVERTING_REDUCTIONS.get(name)
    if lowp_kept is None or in_dtype == out_dtype:
        return False
    return not (lowp_kept and in_dtype in ("float16", "bfloat16") and out_dtype == "float32")


def scatter_accumulates(rule: tuple[str, bool | str], args: dict[str, Any]) -> bool:
    """Whether a :data:`SCATTER_WRITES` op reads the elements it updates, given its arguments by name.

    >>> scatter_accumulates(SCATTER_WRITES["index_put_"], {"accumulate": True})
    True
    """
    flag = rule[1]
    return args.get(flag) is True if isinstance(flag, str) else flag


class Refused(Exception):
    """Why an op record cannot be costed: ``reason`` (:data:`NO_SHAPES`, :data:`BAD_SHAPES`,
    :data:`UNKNOWN_DTYPE`, ...), ``detail`` for the log. Raised by every rule reading a record
    (here, :mod:`~inductor_perf.costs.ops.fbgemm`, :mod:`~inductor_perf.costs.ops.meta`)."""

    def __init__(self, reason: str = BAD_SHAPES, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail


def recorded(args: Any) -> tuple[list, list, list | None]:
    """An op event's ``Input Dims``, ``Input type`` and (None when missing or of another length)
    ``Concrete Inputs``; refuses (:data:`NO_SHAPES`) a record without dims and types of one length."""
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    types = args.get("Input type") if isinstance(args, dict) else None
    if not isinstance(dims, list) or not dims or not isinstance(types, list) or len(types) != len(dims):
        raise Refused(NO_SHAPES)
    concrete = args.get("Concrete Inputs")
    return dims, types, concrete if isinstance(concrete, list) and len(concrete) == len(dims) else None


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op call."""

    flops: int
    matmul_flops: int
    bytes_read: int
    bytes_written: int
    dtype: str
    """The dtype's name as torch spells it ("bfloat16"); see :func:`parse_dtype_name`."""
    bound: str | None = None
    """None: the op's cost; "lower" (:data:`inductor_perf.model.events.LOWER_BOUND`): a lower bound, the
    record leaving out values that change the cost (docs/costs.md)."""


def lower_bound(costs: list[OpCost]) -> OpCost | str:
    """The least cost over ``costs`` (the costs of one op's record under each value torch accepts
    for what it did not record; two or more, in the order tried), marked ``bound="lower"``: each of
    FLOPs, matmul FLOPs, bytes read and bytes written is its own minimum, so each number, and their
    sum, is at most what any candidate costs. Its dtype is that of the first candidate moving the
    fewest bytes. No bytes and no FLOPs (a bound that says nothing): :data:`NO_SHAPES`.

    >>> lower_bound([OpCost(8, 0, 32, 8, "float32"), OpCost(8, 0, 32, 4, "float32")])
    OpCost(flops=8, matmul_flops=0, bytes_read=32, bytes_written=4, dtype='float32', bound='lower')
    """
    least = min(costs, key=lambda c: c.bytes_read + c.bytes_written)
    got = OpCost(min(c.flops for c in costs), min(c.matmul_flops for c in costs), min(c.bytes_read for c in costs),
                 min(c.bytes_written for c in costs), least.dtype, LOWER_BOUND)
    if not (got.flops or got.bytes_read or got.bytes_written):
        return NO_SHAPES
    return got


def _import_torch_elsewhere(modules: tuple[str, ...] = ("torch",)) -> None:
    """Import torch (and ``modules``) on a helper thread the first time.

    Importing torch keeps references to some frames of the importing stack (measured: a 1M-event
    trace stayed alive after costs_from_shapes returned, and freeing it at interpreter exit took
    ~20 s). On a fresh thread that stack ends at the thread, not at our caller's trace.
    """
    missing = [m for m in modules if m not in sys.modules]
    if not missing:
        return
    errors: list[BaseException] = []

    def run() -> None:
        for m in missing:
            try:
                importlib.import_module(m)
            except ImportError as e:
                if m == missing[0]:
                    errors.append(e)  # torch itself: re-raised on the calling thread
            except BaseException as e:
                errors.append(e)

    t = threading.Thread(target=run, name="inductor_perf-import-torch")
    t.start()
    t.join()
    if errors:
        raise errors[0]


# --- dtype strings -------------------------------------------------------------------------------
# Profiler ``Input type`` string -> (torch dtype name, itemsize in bytes), without importing torch.
# Keys: every torch.dtype attribute name of torch 2.11 - 2.15 ("float32", "half", "cfloat", ...) plus the
# caffe2 TypeMeta spellings the profiler records (C++ builtins, c10:: class names).
# tests/unit/costs/test_op_costs.py checks each entry against torch (name and itemsize).
_DTYPE_NAMES: dict[str, tuple[str, int]] = {
    "bfloat16": ("bfloat16", 2), "bit": ("uint1", 1), "bits16": ("bits16", 2), "bits1x8": ("bits1x8", 1),
    "bits2x4": ("bits2x4", 1), "bits4x2": ("bits4x2", 1), "bits8": ("bits8", 1), "bool": ("bool", 1),
    "c10::BFloat16": ("bfloat16", 2), "c10::Float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1), "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1), "c10::Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "c10::Float8_e8m0fnu": ("float8_e8m0fnu", 1), "c10::Half": ("float16", 2),
    "c10::complex<c10::Half>": ("complex32", 4), "c10::complex<double>": ("complex128", 16),
    "c10::complex<float>": ("complex64", 8), "cdouble": ("complex128", 16), "cfloat": ("complex64", 8),
    "chalf": ("complex32", 4), "complex128": ("complex128", 16), "complex32": ("complex32", 4),
    "bcomplex32": ("bcomplex32", 4), "c10::complex<c10::BFloat16>": ("bcomplex32", 4),
    "complex64": ("complex64", 8), "double": ("float64", 8), "float": ("float32", 4),
    "float16": ("float16", 2), "float32": ("float32", 4), "float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),
    "float64": ("float64", 8), "float8_e4m3fn": ("float8_e4m3fn", 1), "float8_e4m3fnuz": ("float8_e4m3fnuz", 1),
    "float8_e5m2": ("float8_e5m2", 1), "float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "float8_e8m0fnu": ("float8_e8m0fnu", 1), "half": ("float16", 2), "int": ("int32", 4), "int1": ("int1", 1),
    "int16": ("int16", 2), "int2": ("int2", 1), "int3": ("int3", 1), "int32": ("int32", 4), "int4": ("int4", 1),
    "int5": ("int5", 1), "int6": ("int6", 1), "int64": ("int64", 8), "int7": ("int7", 1), "int8": ("int8", 1),
    "long": ("int64", 8), "long int": ("int64", 8), "qint32": ("qint32", 4), "qint8": ("qint8", 1),
    "quint2x4": ("quint2x4", 1), "quint4x2": ("quint4x2", 1), "quint8": ("quint8", 1), "short": ("int16", 2),
    "short int": ("int16", 2), "signed char": ("int8", 1), "uint1": ("uint1", 1), "uint16": ("uint16", 2),
    "uint2": ("uint2", 1), "uint3": ("uint3", 1), "uint32": ("uint32", 4), "uint4": ("uint4", 1),
    "uint5": ("uint5", 1), "uint6": ("uint6", 1), "uint64": ("uint64", 8), "uint7": ("uint7", 1),
    "uint8": ("uint8", 1), "unsigned char": ("uint8", 1), "unsigned int": ("uint32", 4),
    "unsigned long": ("uint64", 8), "unsigned short": ("uint16", 2),
}
_ITEMSIZE: dict[str, int] = {name: size for name, size in _DTYPE_NAMES.values()}


def parse_dtype_name(name: Any) -> str | None:
    """The torch dtype NAME of a profiler ``Input type`` string, or None when unknown (no torch).

    >>> parse_dtype_name("c10::BFloat16")
    'bfloat16'
    """
    entry = _DTYPE_NAMES.get(name) if isinstance(name, str) else None
    return entry[0] if entry is not None else None


def parse_dtype(name: Any) -> Any:
    """The torch.dtype of a profiler ``Input type`` string, or None when unknown (imports torch).

    >>> parse_dtype("c10::BFloat16")
    torch.bfloat16
    """
    dt = parse_dtype_name(name)
    if dt is None:
        return None
    _import_torch_elsewhere()
    import torch

    return getattr(torch, dt, None)


# --- reading the recorded inputs -----------------------------------------------------------------
class _Inputs:
    """Positional access to an op event's ``Input Dims`` / ``Input type`` / ``Concrete Inputs``."""

    def __init__(self, args: dict) -> None:
        dims = args.get("Input Dims")
        if not isinstance(dims, list) or not dims:
            raise Refused(NO_SHAPES)
        types = args.get("Input type")
        concrete = args.get("Concrete Inputs")
        self.dims = dims
        self.types = types if isinstance(types, list) else []
        self.concrete = concrete if isinstance(concrete, list) else None

    def has_tensor(self, i: int) -> bool:
        if i >= len(self.dims):
            return False
        d = self.dims[i]
        return isinstance(d, list) and len(d) > 0 and (i < len(self.types) and self.types[i] not in (
            "", "Scalar", "ScalarList", "TensorList", "GenericList", None))

    def tensor(self, i: int, rank: int | None = None) -> tuple[tuple[int, ...], Any]:
        if i >= len(self.dims):
            raise Refused(BAD_SHAPES, f"no input {i}")
        d = self.dims[i]
        if not isinstance(d, list) or not all(type(x) is int and x >= 0 for x in d):
            raise Refused(BAD_SHAPES, f"input {i} dims {d!r}")
        if rank is not None and len(d) != rank:
            raise Refused(BAD_SHAPES, f"input {i} has rank {len(d)}, expected {rank}")
        if i >= len(self.types):
            raise Refused(NO_SHAPES, f"no type for input {i}")
        dt = parse_dtype_name(self.types[i])
        if dt is None:
            raise Refused(UNKNOWN_DTYPE, str(self.types[i])[:60])
        return tuple(d), dt

    def ints(self, i: int | None, n: int, default: int | None = None) -> list[int]:
        """A list of ``n`` ints from concrete input ``i`` ("[2, 2]", "2", "[2]", or JSON numbers)."""
        if i is None:
            if default is None:
                raise Refused(NO_SHAPES)
            return [default] * n
        if self.concrete is None or i >= len(self.concrete):
            if default is not None and self.concrete is not None:
                return [default] * n  # trailing defaulted argument not recorded
            raise Refused(NO_SHAPES, "no Concrete Inputs")
        v = self.concrete[i]
        if isinstance(v, str):
            s = v.strip()
            if s == "" and default is not None:
                return [default] * n
            try:
                vals = [int(x) for x in s.strip("[]()").split(",") if x.strip()]
            except ValueError:
                raise Refused(BAD_SHAPES, f"concrete input {i} {v[:40]!r}") from None
        elif type(v) is int:
            vals = [v]
        elif isinstance(v, list) and all(type(x) is int for x in v):
            vals = list(v)
        else:
            raise Refused(BAD_SHAPES, f"concrete input {i} {v!r}")
        if len(vals) == 1:
            vals = vals * n
        if len(vals) != n:
            raise Refused(BAD_SHAPES, f"concrete input {i} has {len(vals)} values, expected {n}")
        return vals

    def flag(self, i: int | None, default: bool) -> bool:
        if i is None:
            return default
        if self.concrete is None or i >= len(self.concrete):
            raise Refused(NO_SHAPES, "no Concrete Inputs")
        v = self.concrete[i]
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip() in ("True", "true", "1"):
            return True
        if isinstance(v, str) and v.strip() in ("False", "false", "0"):
            return False
        raise Refused(BAD_SHAPES, f"concrete input {i} {v!r} is not a bool")


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * _ITEMSIZE[dtype]


# --- shape-level FLOP formulas --------------------------------------------------------------------
# The same counts as torch.utils.flop_counter's mm_flop / bmm_flop / conv_flop / sdpa_flop_count
# (tests/unit/costs/test_op_costs.py checks them against it), written here so that attributing a trace
# never imports torch.utils.flop_counter. A multiply-add is 2 FLOPs; bias adds are not counted.
def mm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    """FLOPs of ``[m, k] @ [k, n]``: 2*m*k*n. Raises ValueError when the inner sizes differ."""
    m, k = a
    k2, n = b
    if k != k2:
        raise ValueError(f"mm: inner sizes {k} and {k2} differ")
    return 2 * m * k * n


def bmm_flops(a: Sequence[int], b: Sequence[int]) -> int:
    """FLOPs of ``[B, m, k] @ [B, k, n]``: 2*B*m*k*n. Raises ValueError when B or k differ."""
    nb, m, k = a
    nb2, k2, n = b
    if nb != nb2 or k != k2:
        raise ValueError(f"bmm: shapes {list(a)} and {list(b)} do not fit")
    return 2 * nb * m * k * n


def conv_flops(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    """FLOPs of a convolution with input ``x``, weight ``w`` and output ``out`` (N, C, spatial...).

    Each output point (each *input* point for a transposed conv) takes a filter window times
    ``w[0] * w[1]`` channel pairs, 2 FLOPs each.
    """
    points = math.prod((x if transposed else out)[2:])
    return 2 * x[0] * points * math.prod(w[2:]) * w[0] * w[1]


def sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """FLOPs of attention's two matmuls (``q @ k^T`` and ``scores @ v``) for ``[B, H, S, D]`` inputs;
    key/value may have fewer heads (GQA) when the query's head count is a multiple of theirs."""
    nb, hq, sq, dq = q
    nb2, hkv, sk, dk = k
    nb3, hv, sv, dv = v
    if not (nb == nb2 == nb3 and hkv == hv and dq == dk and sk == sv) or hkv < 1 or hq < hkv or hq % hkv:
        raise ValueError(f"attention: shapes q={list(q)} k={list(k)} v={list(v)} do not fit")
    return 2 * nb * hq * sq * sk * (dq + dv)


# --- formulas ------------------------------------------------------------------------------------
def _mm_like(a_pos: int, b_pos: int, self_pos: int | None, batched: bool) -> Callable[[_Inputs], OpCost]:
    rank = 3 if batched else 2

    def cost(inp: _Inputs) -> OpCost:
        a, adt = inp.tensor(a_pos, rank)
        b, bdt = inp.tensor(b_pos, rank)
        try:
            flops = bmm_flops(a, b) if batched else mm_flops(a, b)
        except ValueError as e:
            raise Refused(BAD_SHAPES, str(e)) from None
        out = (a[0], a[1], b[2]) if batched else (a[0], b[1])
        read = _nbytes(a, adt) + _nbytes(b, bdt)
        if self_pos is not None and inp.has_tensor(self_pos):
            s, sdt = inp.tensor(self_pos)
            read += _nbytes(s, sdt)
        return OpCost(flops, flops, read, _nbytes(out, adt), adt)

    return cost


@dataclass(frozen=True)
class _ConvSig:
    """Where each convolution argument sits in an op's schema (None: not an argument)."""

    bias: int | None
    stride: int | None
    padding: int | None
    dilation: int | None
    transposed: int | bool
    output_padding: int | None
    groups: int | None


def _conv(sig: _ConvSig) -> Callable[[_Inputs], OpCost]:
    def cost(inp: _Inputs) -> OpCost:
        x, xdt = inp.tensor(0)
        w, wdt = inp.tensor(1, len(x))
        nsp = len(x) - 2
        if nsp < 1:
            raise Refused(BAD_SHAPES, f"convolution input of rank {len(x)}")
        stride = inp.ints(sig.stride, nsp, default=1 if sig.stride is None else None)
        padding = inp.ints(sig.padding, nsp, default=0)
        dilation = inp.ints(sig.dilation, nsp, default=1)
        transposed = sig.transposed if isinstance(sig.transposed, bool) else inp.flag(sig.transposed, False)
        out_pad = inp.ints(sig.output_padding, nsp, default=0) if transposed else [0] * nsp
        groups = inp.ints(sig.groups, 1, default=1)[0]
        if groups < 1 or any(s < 1 for s in stride) or any(d < 1 for d in dilation):
            raise Refused(BAD_SHAPES, "non-positive stride, dilation or groups")
        k = w[2:]
        if transposed:
            if x[1] != w[0]:
                raise Refused(BAD_SHAPES, f"transposed conv: {x[1]} input channels, weight {w}")
            c_out = w[1] * groups
            spatial = [(i - 1) * s - 2 * p + d * (kk - 1) + op + 1
                       for i, s, p, d, kk, op in zip(x[2:], stride, padding, dilation, k, out_pad)]
        else:
            if x[1] != w[1] * groups:
                raise Refused(BAD_SHAPES, f"conv: {x[1]} input channels, weight {w}, groups {groups}")
            c_out = w[0]
            # PyTorch's Conv docs: out = floor((in + 2p - d(k-1) - 1) / s) + 1
            spatial = [(i + 2 * p - d * (kk - 1) - 1) // s + 1
                       for i, s, p, d, kk in zip(x[2:], stride, padding, dilation, k)]
        if any(o < 1 for o in spatial):
            raise Refused(BAD_SHAPES, f"conv output size {spatial}")
        out = [x[0], c_out, *spatial]
        flops = conv_flops(x, w, out, transposed)
        read = _nbytes(x, xdt) + _nbytes(w, wdt)
        if sig.bias is not None and inp.has_tensor(sig.bias):
            b, bdt = inp.tensor(sig.bias)
            read += _nbytes(b, bdt)
        return OpCost(flops, flops, read, _nbytes(out, xdt), xdt)

    return cost


def _sdpa(mask_pos: int | None) -> Callable[[_Inputs], OpCost]:
    def cost(inp: _Inputs) -> OpCost:
        q, qdt = inp.tensor(0, 4)
        k, kdt = inp.tensor(1, 4)
        v, vdt = inp.tensor(2, 4)
        try:
            flops = sdpa_flops(q, k, v)
        except ValueError as e:
            raise Refused(BAD_SHAPES, str(e)) from None
        read = _nbytes(q, qdt) + _nbytes(k, kdt) + _nbytes(v, vdt)
        if mask_pos is not None and inp.has_tensor(mask_pos):
            m, mdt = inp.tensor(mask_pos)
            read += _nbytes(m, mdt)
        out = (q[0], q[1], q[2], v[3])
        return OpCost(flops, flops, read, _nbytes(out, qdt), qdt)

    return cost


_CONV = _ConvSig(bias=2, stride=3, padding=4, dilation=5, transposed=6, output_padding=7, groups=8)
_MKLDNN = _ConvSig(bias=2, stride=4, padding=3, dilation=5, transposed=False, output_padding=None, groups=6)

# aten op name (without "aten::") -> formula. Positions follow each op's schema
# (torch.ops.aten.<op>.default._schema in torch 2.13).
OP_FORMULAS: dict[str, Callable[[_Inputs], OpCost]] = {
    "mm": _mm_like(0, 1, None, batched=False),
    "addmm": _mm_like(1, 2, 0, batched=False),
    "_addmm_activation": _mm_like(1, 2, 0, batched=False),
    "bmm": _mm_like(0, 1, None, batched=True),
    "baddbmm": _mm_like(1, 2, 0, batched=True),
    "convolution": _conv(_CONV),
    "_convolution": _conv(_CONV),
    "convolution_overrideable": _conv(_CONV),
    "mkldnn_convolution": _conv(_MKLDNN),
    "miopen_convolution": _conv(_MKLDNN),
    "cudnn_convolution": _conv(_ConvSig(bias=None, stride=3, padding=2, dilation=4, transposed=False,
                                        output_padding=None, groups=5)),
    "cudnn_convolution_transpose": _conv(_ConvSig(bias=None, stride=4, padding=2, dilation=5, transposed=True,
                                                  output_padding=3, groups=6)),
    "_slow_conv2d_forward": _conv(_ConvSig(bias=3, stride=4, padding=5, dilation=None, transposed=False,
                                           output_padding=None, groups=None)),
    "slow_conv_dilated2d": _conv(_ConvSig(bias=3, stride=4, padding=5, dilation=6, transposed=False,
                                          output_padding=None, groups=None)),
    "slow_conv_transpose2d": _conv(_ConvSig(bias=3, stride=4, padding=5, dilation=7, transposed=True,
                                            output_padding=6, groups=None)),
    "_scaled_dot_product_flash_attention": _sdpa(None),
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa(5),
    "_scaled_dot_product_efficient_attention": _sdpa(3),
    "_scaled_dot_product_cudnn_attention": _sdpa(3),
    "_scaled_dot_product_attention_math": _sdpa(3),
}


def op_cost(name: Any, args: Any) -> OpCost | None:
    """FLOPs and bytes of one profiler op event (``name`` like ``"aten::addmm"``), or None when the
    op has no formula. Raises nothing: bad shapes give None (see :func:`op_cost_or_reason`)."""
    result = op_cost_or_reason(name, args)
    return result if isinstance(result, OpCost) else None


def op_cost_or_reason(name: Any, args: Any) -> OpCost | str | None:
    """Like :func:`op_cost`, but an op with a formula that cannot be evaluated gives the reason
    (``"no_shapes"``, ``"bad_shapes"`` or ``"unknown_dtype:<name>"``)."""
    if not isinstance(name, str) or not name.startswith(ATEN_PREFIX):
        return None
    formula = OP_FORMULAS.get(name[len(ATEN_PREFIX):])
    if formula is None:
        return None
    if not isinstance(args, dict):
        return NO_SHAPES
    try:
        return formula(_Inputs(args))
    except Refused as e:
        return f"{UNKNOWN_DTYPE}:{e.detail}" if e.reason == UNKNOWN_DTYPE else e.reason
    except (TypeError, ValueError, OverflowError, IndexError, AssertionError) as e:
        # flop_counter's own checks, or shapes of the wrong type deep inside a formula
        log.debug("%s: shapes do not fit (%s)", name, e)
        return BAD_SHAPES
