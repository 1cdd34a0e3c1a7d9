"""FLOPs and bytes of aten ops from the shapes torch.profiler recorded (``record_shapes=True``),
and the join that puts each cost on exactly one event of a plain profiler trace.

FLOPs follow ``torch.utils.flop_counter``'s shape-level formulas (re-stated here so attribution
never imports it; a test checks they agree), so our counts equal ``flop_registry`` (and
``FlopCounterMode``) for the same op. Bytes are the op's tensor inputs
plus its output(s), each at its recorded dtype: the traffic of a kernel that reads every input
once and writes every output once.

Conventions carried over from flop_registry: a multiply-add is 2 FLOPs, bias adds are not
counted, attention counts the two matmuls and ignores causal masking.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
import threading
from array import array
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import trace_format as tf
from .event_cost import AugmentStats, EventCost

log = logging.getLogger(__name__)

ATEN_PREFIX = "aten::"

# Why an op got no cost; the stats count the first reason of each op group.
NO_SHAPES = "no_shapes"
BAD_SHAPES = "bad_shapes"
UNKNOWN_DTYPE = "unknown_dtype"


class _Skip(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op call."""

    flops: int
    matmul_flops: int
    bytes_read: int
    bytes_written: int
    dtype: str
    """The dtype's name as torch spells it ("bfloat16"); see :func:`parse_dtype_name`."""


def warm_up() -> None:
    """Import what attribution, the device table and the roofline need before a large trace is
    loaded (all torch-free: dtypes are handled by name, see :data:`_DTYPE_NAMES`)."""
    for m in ("inductor_perf.device_table", "inductor_perf.roofline"):
        importlib.import_module(m)


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
# tests/unit/test_shape_costs.py checks each entry against torch (name and itemsize).
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
            raise _Skip(NO_SHAPES)
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
            raise _Skip(BAD_SHAPES, f"no input {i}")
        d = self.dims[i]
        if not isinstance(d, list) or not all(type(x) is int and x >= 0 for x in d):
            raise _Skip(BAD_SHAPES, f"input {i} dims {d!r}")
        if rank is not None and len(d) != rank:
            raise _Skip(BAD_SHAPES, f"input {i} has rank {len(d)}, expected {rank}")
        if i >= len(self.types):
            raise _Skip(NO_SHAPES, f"no type for input {i}")
        dt = parse_dtype_name(self.types[i])
        if dt is None:
            raise _Skip(UNKNOWN_DTYPE, str(self.types[i])[:60])
        return tuple(d), dt

    def ints(self, i: int | None, n: int, default: int | None = None) -> list[int]:
        """A list of ``n`` ints from concrete input ``i`` ("[2, 2]", "2", "[2]", or JSON numbers)."""
        if i is None:
            if default is None:
                raise _Skip(NO_SHAPES)
            return [default] * n
        if self.concrete is None or i >= len(self.concrete):
            if default is not None and self.concrete is not None:
                return [default] * n  # trailing defaulted argument not recorded
            raise _Skip(NO_SHAPES, "no Concrete Inputs")
        v = self.concrete[i]
        if isinstance(v, str):
            s = v.strip()
            if s == "" and default is not None:
                return [default] * n
            try:
                vals = [int(x) for x in s.strip("[]()").split(",") if x.strip()]
            except ValueError:
                raise _Skip(BAD_SHAPES, f"concrete input {i} {v[:40]!r}") from None
        elif type(v) is int:
            vals = [v]
        elif isinstance(v, list) and all(type(x) is int for x in v):
            vals = list(v)
        else:
            raise _Skip(BAD_SHAPES, f"concrete input {i} {v!r}")
        if len(vals) == 1:
            vals = vals * n
        if len(vals) != n:
            raise _Skip(BAD_SHAPES, f"concrete input {i} has {len(vals)} values, expected {n}")
        return vals

    def flag(self, i: int | None, default: bool) -> bool:
        if i is None:
            return default
        if self.concrete is None or i >= len(self.concrete):
            raise _Skip(NO_SHAPES, "no Concrete Inputs")
        v = self.concrete[i]
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip() in ("True", "true", "1"):
            return True
        if isinstance(v, str) and v.strip() in ("False", "false", "0"):
            return False
        raise _Skip(BAD_SHAPES, f"concrete input {i} {v!r} is not a bool")


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * _ITEMSIZE[dtype]


# --- shape-level FLOP formulas --------------------------------------------------------------------
# The same counts as torch.utils.flop_counter's mm_flop / bmm_flop / conv_flop / sdpa_flop_count
# (tests/unit/test_shape_costs.py checks them against it), written here so that attributing a trace
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
            raise _Skip(BAD_SHAPES, str(e)) from None
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
            raise _Skip(BAD_SHAPES, f"convolution input of rank {len(x)}")
        stride = inp.ints(sig.stride, nsp, default=1 if sig.stride is None else None)
        padding = inp.ints(sig.padding, nsp, default=0)
        dilation = inp.ints(sig.dilation, nsp, default=1)
        transposed = sig.transposed if isinstance(sig.transposed, bool) else inp.flag(sig.transposed, False)
        out_pad = inp.ints(sig.output_padding, nsp, default=0) if transposed else [0] * nsp
        groups = inp.ints(sig.groups, 1, default=1)[0]
        if groups < 1 or any(s < 1 for s in stride) or any(d < 1 for d in dilation):
            raise _Skip(BAD_SHAPES, "non-positive stride, dilation or groups")
        k = w[2:]
        if transposed:
            if x[1] != w[0]:
                raise _Skip(BAD_SHAPES, f"transposed conv: {x[1]} input channels, weight {w}")
            c_out = w[1] * groups
            spatial = [(i - 1) * s - 2 * p + d * (kk - 1) + op + 1
                       for i, s, p, d, kk, op in zip(x[2:], stride, padding, dilation, k, out_pad)]
        else:
            if x[1] != w[1] * groups:
                raise _Skip(BAD_SHAPES, f"conv: {x[1]} input channels, weight {w}, groups {groups}")
            c_out = w[0]
            # PyTorch's Conv docs: out = floor((in + 2p - d(k-1) - 1) / s) + 1
            spatial = [(i + 2 * p - d * (kk - 1) - 1) // s + 1
                       for i, s, p, d, kk in zip(x[2:], stride, padding, dilation, k)]
        if any(o < 1 for o in spatial):
            raise _Skip(BAD_SHAPES, f"conv output size {spatial}")
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
            raise _Skip(BAD_SHAPES, str(e)) from None
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
    except _Skip as e:
        return f"{UNKNOWN_DTYPE}:{e.detail}" if e.reason == UNKNOWN_DTYPE else e.reason
    except (TypeError, ValueError, OverflowError, IndexError, AssertionError) as e:
        # flop_counter's own checks, or shapes of the wrong type deep inside a formula
        log.debug("%s: shapes do not fit (%s)", name, e)
        return BAD_SHAPES


# --- the join ------------------------------------------------------------------------------------
def _key(v: Any) -> Any:
    """A hashable stand-in for a pid / tid / id value of any JSON type."""
    return v if isinstance(v, (str, int, float)) else repr(v)


def _num(v: Any) -> float | None:
    """:func:`trace_format.number` with a shortcut for the plain floats and ints of parsed JSON."""
    t = type(v)
    if t is float:
        return v if v - v == 0.0 else None  # inf - inf and nan - nan are nan
    if t is int and -(1 << 53) <= v <= (1 << 53):
        return float(v)
    return tf.number(v)


def _k(v: Any) -> Any:
    """:func:`_key` with a shortcut for the str / int ids of parsed JSON."""
    t = type(v)
    return v if t is int or t is str else _key(v)


def _precost(args: dict) -> EventCost | None:
    """Cost already on the event (Triton launches with benchmark_kernel / profile_bandwidth)."""
    if tf.KERNEL_FLOP not in args and tf.KERNEL_NUM_GB not in args:
        return None  # the usual case, decided without the lookups below
    flop = args.get(tf.KERNEL_FLOP)
    gb = args.get(tf.KERNEL_NUM_GB)
    flop_n = tf.number(flop)
    gb_n = tf.number(gb)
    if flop_n is None and gb_n is None:
        return None
    flops = int(flop_n) if flop_n is not None and flop_n >= 0 else 0
    nbytes = int(round(gb_n * 1e9)) if gb_n is not None and gb_n >= 0 else 0
    src = args.get(tf.COST_SOURCE)
    matmul = tf.number(args.get(tf.KERNEL_MATMUL_FLOP))
    return EventCost(flops=flops, matmul_flops=int(matmul) if matmul is not None and 0 <= matmul <= flops else 0,
                     bytes_read=nbytes, bytes_written=0,
                     cost_source=src if src in ("tag", "triton") else "triton")


def costs_from_shapes(trace: dict) -> tuple[dict[int, EventCost], AugmentStats]:
    """Per-event costs of a plain torch.profiler trace recorded with ``record_shapes=True``.

    Each op's cost is counted once: on its device kernel when it launched any (joined through
    ``correlation`` / ac2g flows / ``External id``; the longest kernel when several), else on the
    CPU op itself. Among nested ops with formulas (``aten::convolution`` > ``aten::_convolution`` >
    ``aten::mkldnn_convolution``) only the innermost one that could be costed counts.

    >>> costs, stats = costs_from_shapes(load_trace("resnet.pt.trace.json"))  # doctest: +SKIP
    """
    tf.validate_trace(trace)
    events = trace["traceEvents"]
    join = CostJoin(load=events.__getitem__)
    add = join.add
    for i, ev in enumerate(events):
        if isinstance(ev, dict):
            add(i, ev)
    return join.finish(len(events))


def _memo_key(name: str, args: dict) -> Any:
    """An exact key for an op's recorded inputs: orjson's encoding when it is unambiguous (it writes
    NaN as null and refuses >64-bit ints), else ``repr`` (slower, same meaning)."""
    inputs = (args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"))
    if _dumps is not None:
        try:
            b = _dumps(inputs)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
        else:
            if b"null" not in b:
                return name, b
    return name, repr(inputs)


def _orjson_dumps() -> Any:
    try:
        from orjson import dumps
    except ImportError:
        return None
    return dumps


_dumps = _orjson_dumps()


_KERNEL_CATS, _SCOPE_CATS, _RUNTIME_CATS, _OP_CATS = tf.KERNEL_CATS, tf.CPU_SCOPE_CATS, tf.RUNTIME_CATS, tf.CPU_OP_CATS
_KF, _KGB = tf.KERNEL_FLOP, tf.KERNEL_NUM_GB
_AP = len(ATEN_PREFIX)
# Event category -> 0 device kernel, 1 CPU op, 2 runtime call, 3 other CPU scope, -1 none of these.
_CAT_KIND: dict[str, int] = {}


def _cat_kind(cat: Any) -> int:
    """The kind of category ``cat`` (matched lower-cased), remembered for the few that traces use."""
    if not isinstance(cat, str):
        return -1
    c = cat.lower()
    kind = (0 if c in _KERNEL_CATS else 1 if c in _OP_CATS else 3 if c in _SCOPE_CATS
            else 2 if c in _RUNTIME_CATS else -1)
    if type(cat) is str and len(_CAT_KIND) < 1024:
        _CAT_KIND[cat] = kind
    return kind


class CostJoin:
    """:func:`costs_from_shapes` one event at a time: ``add(i, event)`` for each dict event in
    order, then ``finish(n_events)``. Keeps only what the join of most traces reads, not the events,
    so a caller that parses events one by one never has to hold them all.

    ``load(i)`` gives event ``i`` again (parsed anew, or from the caller's list). :meth:`finish`
    reads back with it what only some traces need: flow events (when a kernel's correlation names no
    runtime call), a kernel's location (for those flows) and a runtime call's External id (when its
    launching op cannot be found by nesting).
    """

    def __init__(self, load: Callable[[int], Any]) -> None:
        self.stats = AugmentStats()
        # (pid, tid) -> [(ts, -dur, i)] of CPU ops, other CPU scopes and runtime calls
        self.by_thread: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
        self.is_scope: set[int] = set()
        self.ext_to_op: dict[Any, int] = {}
        self.dup_ext: set[Any] = set()
        self.runtime_by_corr: dict[Any, int] = {}
        # kernel index -> (correlation, External id, precost, dur)
        self.kernels: dict[int, tuple[Any, Any, EventCost | None, float]] = {}
        self.own: dict[int, EventCost] = {}
        self.memo: dict[Any, Any] = {}
        self.failed: dict[int, str] = {}
        self.recognized: set[int] = set()
        self._load = load
        self.flows_later = array("q")
        """Indices of flow events ("s"/"f"), parsed in :meth:`finish` only if a kernel needs them;
        :meth:`add` appends to it, and a caller that sees ``ph`` first may append flows itself
        instead of calling :meth:`add`."""

    def add(self, i: int, ev: dict) -> None:
        """Index event ``i`` (a dict)."""
        ph = ev.get("ph")
        if ph != "X":
            if ph == "s" or ph == "f":
                self.flows_later.append(i)
            return
        cat = ev.get("cat")
        kind = _CAT_KIND.get(cat) if type(cat) is str else None
        if kind is None:
            kind = _cat_kind(cat)
        if kind < 0:
            return
        ts = ev.get("ts")
        if type(ts) is not float or ts - ts != 0.0:
            ts = _num(ts)
            if ts is None:
                return
        dur = ev.get("dur")
        if type(dur) is not float or not dur > 0.0 or dur - dur != 0.0:
            dur = _num(dur)
            dur = dur if dur is not None and dur > 0 else 0.0
        args = ev.get("args")
        if type(args) is not dict:
            args = args if isinstance(args, dict) else {}
        stats = self.stats
        if kind == 0:
            stats.device_kernels += 1
            corr = args.get("correlation")
            pre = _precost(args) if (_KF in args or _KGB in args) else None
            self.kernels[i] = (_k(corr) if corr is not None else None, args.get("External id"), pre, dur)
            return
        pid = ev.get("pid")
        if type(pid) is not int and type(pid) is not str:
            pid = _key(pid)
        tid = ev.get("tid")
        if type(tid) is not int and type(tid) is not str:
            tid = _key(tid)
        self.by_thread[(pid, tid)].append((ts, -dur, i))
        if kind == 2:
            corr = args.get("correlation")
            if corr is not None:
                self.runtime_by_corr[_k(corr)] = i
            return
        self.is_scope.add(i)
        if kind == 1:
            stats.cpu_ops += 1
            ext = args.get("External id")
            if ext is not None:
                k = _k(ext)
                if k in self.ext_to_op:
                    self.dup_ext.add(k)
                    stats.duplicate_external_ids += 1
                else:
                    self.ext_to_op[k] = i
        name = ev.get("name")
        if type(name) is not str or name[_AP:] not in OP_FORMULAS:
            result = None
        else:
            # Steps repeat the same layers: memoize by the recorded inputs (repr is a cheap,
            # exact key for JSON values).
            memo = self.memo
            memo_key = _memo_key(name, args)
            result = memo.get(memo_key, memo)
            if result is memo:
                result = op_cost_or_reason(name, args)
                if isinstance(result, OpCost):
                    # EventCost is frozen: one instance can serve every op with these inputs.
                    result = EventCost(flops=int(result.flops), matmul_flops=int(result.matmul_flops),
                                       bytes_read=int(result.bytes_read), bytes_written=int(result.bytes_written),
                                       dtype=result.dtype, cost_source="shapes")
                if isinstance(memo_key[1], bytes):
                    # orjson's output keeps its whole write buffer (~4 KB) alive; store a tight copy.
                    memo_key = (memo_key[0], memoryview(memo_key[1]).tobytes())
                memo[memo_key] = result
        if result is None:
            pre = _precost(args) if (_KF in args or _KGB in args) else None
            if pre is not None:
                self.own[i] = pre
                stats.triton_costed += 1
            return
        self.recognized.add(i)
        if type(result) is EventCost:
            self.own[i] = result
        else:
            self.failed[i] = result

    _STATE = ("by_thread", "is_scope", "ext_to_op", "dup_ext", "runtime_by_corr", "kernels", "own", "failed",
              "recognized", "flows_later")

    def state(self) -> tuple:
        """What :meth:`add` recorded, as plain containers (picklable; the op memo is left out):
        another process's join over a later range of events hands this to :meth:`merge`."""
        s = self.stats
        counts = (s.device_kernels, s.cpu_ops, s.duplicate_external_ids, s.triton_costed)
        return (counts, tuple(dict(self.by_thread) if n == "by_thread" else getattr(self, n)
                              for n in self._STATE))

    def merge(self, state: tuple) -> None:
        """Take in the :meth:`state` of a join over events that all come after this one's, as if
        :meth:`add` had been called on them here, in order."""
        counts, parts = state
        st = dict(zip(self._STATE, parts))
        s = self.stats
        s.device_kernels += counts[0]
        s.cpu_ops += counts[1]
        s.duplicate_external_ids += counts[2]
        s.triton_costed += counts[3]
        by_thread = self.by_thread
        for key, items in st["by_thread"].items():
            by_thread[key].extend(items)  # sorted in finish(); the event index makes every item unique
        # Keyed by event index: the two ranges never share a key.
        for n in ("kernels", "own", "failed"):
            getattr(self, n).update(st[n])
        self.is_scope |= st["is_scope"]
        self.recognized |= st["recognized"]
        self.runtime_by_corr.update(st["runtime_by_corr"])  # a later event overwrites, as in add()
        self.flows_later.extend(st["flows_later"])
        # An External id first seen in the later range is a duplicate when this range has it.
        mine, theirs, dup = self.ext_to_op, st["ext_to_op"], self.dup_ext
        common = mine.keys() & theirs.keys()
        mine.update(theirs if not common else {k: i for k, i in theirs.items() if k not in common})
        dup |= common
        dup |= st["dup_ext"]
        s.duplicate_external_ids += len(common)

    def _flows(self) -> "_Flows":
        """Parse the flow events put aside and index the runtime calls by location."""
        flows = _Flows()
        load = self._load
        for i in self.flows_later:
            ev = load(i)
            cat = ev.get("cat")
            if not isinstance(cat, str) or cat.lower() not in tf.FLOW_CATS:
                continue
            loc = _loc(ev)
            if loc is None:
                continue
            if ev.get("ph") == "s":
                flows.start[_k(ev.get("id"))] = loc
            else:
                flows.finish[loc] = _k(ev.get("id"))
        is_scope, by_loc = self.is_scope, flows.runtime_by_loc
        for (pid, tid), items in self.by_thread.items():
            for ts, _negdur, i in items:
                if i not in is_scope:
                    # the later of two runtime calls at one place wins, as for correlations
                    j = by_loc.get((pid, tid, ts))
                    if j is None or i > j:
                        by_loc[(pid, tid, ts)] = i
        return flows

    def _runtime_ext(self, runtime: int) -> Any:
        """The External id a runtime call carries (that of its launching op), or None."""
        args = self._load(runtime).get("args")
        return args.get("External id") if isinstance(args, dict) else None

    def finish(self, n_events: int) -> tuple[dict[int, EventCost], AugmentStats]:
        """The costs by event index, and the stats of a trace of ``n_events`` events."""
        stats = self.stats
        stats.events = n_events
        own, recognized = self.own, self.recognized
        # Nesting of CPU-side events per thread (parent = innermost enclosing scope).
        parent: dict[int, int] = {}
        is_scope = self.is_scope
        for items in self.by_thread.values():
            items.sort()
            stack: list[tuple[float, int]] = []
            for ts, negdur, i in items:
                while stack and stack[-1][0] <= ts:
                    stack.pop()
                if stack:
                    parent[i] = stack[-1][1]
                if i in is_scope:
                    stack.append((ts - negdur, i))  # the end, exactly ts + dur

        # Only the innermost costed op of a nest counts; outer ones are shadowed.
        shadowed: set[int] = set()
        covered: set[int] = set()  # recognized ops with a costed op at or below them
        for i in own:
            covered.add(i)
            p = parent.get(i)
            while p is not None:
                if p in own:
                    shadowed.add(p)
                if p in recognized:
                    covered.add(p)
                p = parent.get(p)
        unknown_names: set[str] = set()
        for i, reason in self.failed.items():
            if i in covered or _has_recognized_ancestor(i, parent, recognized):
                continue  # counted once per nest, at its outermost op
            if reason.startswith(UNKNOWN_DTYPE):
                stats.unknown_dtypes += 1
                unknown_names.add(reason.split(":", 1)[1])
            elif reason == NO_SHAPES:
                stats.ops_without_shapes += 1
            else:
                stats.ops_bad_shapes += 1
        stats.unknown_dtype_names = tuple(sorted(unknown_names))

        # Device kernels -> runtime call -> launching op -> nearest costed op. Each op keeps its
        # longest kernel, which did the op's main work (split-K reductions, layout transforms and
        # fills are short); the first one wins a tie.
        costs: dict[int, EventCost] = {}
        best: dict[int, tuple[float, int]] = {}  # op -> (dur, kernel)
        several: set[int] = set()
        served: set[int] = set()
        kernels, by_corr = self.kernels, self.runtime_by_corr
        flows: _Flows | None = None
        for k in sorted(kernels):
            corr, ext, pre, dur = kernels[k]
            runtime = by_corr.get(corr) if corr is not None else None
            if runtime is None and self.flows_later:
                if flows is None:
                    flows = self._flows()
                runtime = flows.runtime_of(self._load(k))
            # The runtime call sits inside its launching op on the CPU thread: exact, even when
            # External ids repeat.
            launch = parent.get(runtime) if runtime is not None else None
            if launch is None:
                if ext is None and runtime is not None:
                    ext = self._runtime_ext(runtime)  # it carries its launching op's External id
                if ext is not None:
                    ek = _key(ext)
                    launch = None if ek in self.dup_ext else self.ext_to_op.get(ek)
            target = launch
            while target is not None and target not in own:
                target = parent.get(target)
            if pre is not None:
                costs[k] = pre
                stats.triton_costed += 1
                if target is not None:
                    served.add(target)
                continue
            if launch is None:
                stats.kernels_without_launch += 1
                continue
            if target is not None and target not in shadowed:
                held = best.get(target)
                if held is None:
                    best[target] = (dur, k)
                else:
                    several.add(target)
                    if dur > held[0]:  # kernels come in index order: a tie keeps the first
                        best[target] = (dur, k)

        costed = 0
        for i, cost in own.items():
            if i in shadowed or i in served:
                continue
            costed += 1
            held = best.get(i)
            costs[i if held is None else held[1]] = cost
        stats.ops_costed = costed
        stats.ops_with_several_kernels += len(several - served)
        return costs, stats


def _loc(ev: dict) -> tuple[Any, Any, float] | None:
    """Where an event is: (pid, tid, ts) as :meth:`CostJoin.add` keys them, or None without a ts."""
    ts = _num(ev.get("ts"))
    return None if ts is None else (_k(ev.get("pid")), _k(ev.get("tid")), ts)


class _Flows:
    """The ac2g flow pairs of a trace and its runtime calls by location: how a kernel whose
    correlation names no runtime call finds the call that launched it."""

    def __init__(self) -> None:
        self.start: dict[Any, tuple[Any, Any, float]] = {}
        self.finish: dict[tuple[Any, Any, float], Any] = {}
        self.runtime_by_loc: dict[tuple[Any, Any, float], int] = {}

    def runtime_of(self, kernel: dict) -> int | None:
        loc = _loc(kernel)
        fid = self.finish.get(loc) if loc is not None else None
        start = self.start.get(fid) if fid is not None else None
        return self.runtime_by_loc.get(start) if start is not None else None


def _has_recognized_ancestor(i: int, parent: dict[int, int], recognized: set[int]) -> bool:
    p = parent.get(i)
    while p is not None:
        if p in recognized:
            return True
        p = parent.get(p)
    return False
