"""FLOPs and bytes of any aten op from the shapes torch.profiler recorded, by torch's own shape rules.

For an op without a hand formula (:data:`inductor_perf.costs.ops.formulas.OP_FORMULAS`) we find the
overload of ``torch.ops.aten.<name>`` whose schema fits the recorded arguments (the profiler records
every schema argument in order: ``Input Dims``, ``Input type``, ``Concrete Inputs``), build meta
tensors of those shapes and dtypes, run the overload on the meta device and read its outputs.
docs/costs.md, "Ops of plain profiler traces", says what is counted and how values the trace did
not record are tried.

Torch runs once per distinct signature (op, dims, types, concrete values); results are also kept
on disk by torch version, so a warm run never imports torch (:class:`DiskCache`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import math
import os
import warnings
from pathlib import Path
from typing import Any, Iterator

from ... import config
from .fbgemm import ext_cost_or_reason, ext_formula
from .formulas import (ATEN_PREFIX, BAD_SHAPES, NO_SHAPES, OP_FORMULAS, SCATTER_WRITES, UNKNOWN_DTYPE, UNKNOWN_OP,
                       OpCost, Refused, _import_torch_elsewhere, lower_bound, parse_dtype_name, reads_converted_input,
                       recorded, scatter_accumulates)
from .formulas import op_cost_or_reason as formula_cost_or_reason

log = logging.getLogger(__name__)

RULES_VERSION = 5  # bumped whenever a rule below changes what a signature costs (in the cache's name)
# 3: candidates that disagree give a lower bound (was no_shapes); unrecorded bool lists enumerated.

_MAX_TRIES = 64
"""Most combinations of unrecorded values tried for one op (each is one meta call)."""

_MAX_BOOL_LIST = 4  # the longest unrecorded bool list (bool[3] output_mask) whose 2**n values are tried

# Allocations: no kernel touches the memory they return.
_ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                          "empty_permuted", "resize_", "set_", "lift_fresh"})
# In-place ops that overwrite ``self`` without reading it.
_WRITE_ONLY_SELF = frozenset({"fill_", "zero_", "copy_", "uniform_", "normal_", "random_", "bernoulli_",
                              "exponential_", "geometric_", "log_normal_", "cauchy_", "set_", "resize_"})
# c10::ScalarType's numbering (c10/core/ScalarType.h), for a dtype argument recorded as an int.
_SCALAR_TYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
                 "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16")


class _Unknown:
    """A value the trace did not record."""

    def __repr__(self) -> str:
        return "?"


UNKNOWN = _Unknown()


# --- the recorded arguments ---------------------------------------------------------------------
def _parse_value(v: Any) -> Any:
    """A ``Concrete Inputs`` entry as a Python value ("1" -> 1, "[0, 1]" -> [0, 1], "" -> UNKNOWN)."""
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return v
    if isinstance(v, list):
        return v
    if not isinstance(v, str) or not v.strip():
        return UNKNOWN
    s = v.strip()
    if s in ("True", "true"):
        return True
    if s in ("False", "false"):
        return False
    try:
        return json.loads(s.replace("(", "[").replace(")", "]").replace("True", "true").replace("False", "false"))
    except ValueError:
        return UNKNOWN


class Record:
    """One op event's recorded arguments: per position its dims, type and concrete value."""

    def __init__(self, args: dict) -> None:
        self.dims, self.types, concrete = recorded(args)
        self.has_concrete = concrete is not None
        self.values = [_parse_value(c) for c in concrete] if concrete is not None else [UNKNOWN] * len(self.dims)
        self.dtypes: list[str | None] = []
        for t, d in zip(self.types, self.dims):
            dt = parse_dtype_name(t)
            if dt is None and t not in ("", "Scalar", "ScalarList", "TensorList", "GenericList", None):
                raise Refused(f"{UNKNOWN_DTYPE}:{str(t)[:60]}")
            if dt is not None and (not isinstance(d, list) or not all(type(x) is int and x >= 0 for x in d)):
                raise Refused(BAD_SHAPES)
            self.dtypes.append(dt)
        # TensorList elements carry no dtype of their own: they take the op's first plain tensor's
        # dtype, else torch's default float32 (docs/costs.md).
        self.list_dtype = next((dt for dt in self.dtypes if dt is not None), "float32")

    def __len__(self) -> int:
        return len(self.dims)


# --- matching a schema --------------------------------------------------------------------------
def _candidates(rec: Record, i: int, arg: Any, rank: int) -> list[Any] | None:
    """The Python values argument ``i`` may take for schema argument ``arg`` (as a spec: tensors as
    ``("T", dims, dtype)``); None: it does not fit. Raises Refused(NO_SHAPES) when a value that
    decides the shape was not recorded and cannot be enumerated."""
    import torch

    t = arg.real_type
    kind = t.kind()
    optional = kind == "OptionalType"
    inner = t.getElementType() if optional else t
    ik = inner.kind()
    rtype, dims, dt, value = rec.types[i], rec.dims[i], rec.dtypes[i], rec.values[i]
    if dt is not None:  # a tensor
        if ik == "TensorType":
            return [("T", tuple(dims), dt)]
        if ik == "NumberType" and not dims:  # a 0-dim tensor where a number goes: not this overload
            return None
        return None
    if rtype == "TensorList":
        if ik != "ListType" or inner.getElementType().kind() not in ("TensorType", "OptionalType"):
            return None
        if not isinstance(dims, list) or not all(isinstance(d, list) for d in dims):
            raise Refused(BAD_SHAPES)
        if not dims:
            raise Refused(NO_SHAPES)  # old profilers record a TensorList's shapes as []
        return [[("T", tuple(d), rec.list_dtype) for d in dims]]
    if rtype == "GenericList":
        raise Refused(NO_SHAPES)  # lists of optional tensors (indices): element shapes not recorded
    if rtype == "Scalar":
        if ik in ("TensorType", "ListType", "StringType"):
            return None
        if ik == "ScalarTypeType":
            if type(value) is int and 0 <= value < len(_SCALAR_TYPES):
                return [getattr(torch, _SCALAR_TYPES[value])]
            raise Refused(NO_SHAPES)
        if ik in ("DeviceObjType",):
            return ["meta"]
        if ik in ("LayoutType", "MemoryFormatType"):
            return [None] if optional else None
        if value is not UNKNOWN:
            return [value]
        if ik == "BoolType":
            return [False, True]
        if ik in ("IntType", "SymIntType"):
            if "dim" in arg.name:
                return list(range(max(rank, 1)))
            raise Refused(NO_SHAPES)
        if ik == "FloatType":
            return [1.0]
        if ik == "NumberType":
            return [1, 1.5]
        raise Refused(NO_SHAPES)
    if rtype == "ScalarList":
        if ik != "ListType":
            return None
        if isinstance(value, list):
            return [value]
        return _unknown_list(arg, rank, optional, _first_shape(rec))
    if rtype in ("", None):
        if ik == "DeviceObjType":
            return ["meta"]
        if rec.has_concrete or ik not in ("ListType",):
            if optional or arg.has_default_value():
                return [None] if optional else [arg.default_value]
            if ik in ("LayoutType", "MemoryFormatType", "GeneratorType", "StringType"):
                raise Refused(NO_SHAPES)
            return None
        return _unknown_list(arg, rank, optional, _first_shape(rec))  # an old profiler's unrecorded list
    return None


def _unknown_list(arg: Any, rank: int, optional: bool, shape: Any = None) -> list[Any]:
    """Every value of an unrecorded ``dim`` list (all subsets of the dims), ``*shape`` list
    (every suffix of the input's shape: ``normalized_shape``) or short fixed-size bool list (all
    2**n masks: ``output_mask``); else Refused."""
    t = arg.real_type
    inner = t.getElementType() if t.kind() == "OptionalType" else t
    if inner.kind() == "ListType" and inner.getElementType().kind() == "BoolType":
        n = getattr(arg, "N", None)
        if type(n) is not int or not 0 < n <= _MAX_BOOL_LIST:
            raise Refused(NO_SHAPES)
        return [list(m) for m in itertools.product((False, True), repeat=n)] + ([None] if optional else [])
    if "shape" in arg.name and shape is not None:
        return [list(shape[k:]) for k in range(len(shape))]
    if "dim" not in arg.name:
        raise Refused(NO_SHAPES)
    dims = range(max(rank, 1))
    subsets: list[Any] = [list(c) for n in range(len(dims) + 1) for c in itertools.combinations(dims, n)]
    return subsets + ([None] if optional else [])


def _first_shape(rec: Record) -> list[int] | None:
    return next((d for d, dt in zip(rec.dims, rec.dtypes) if dt is not None), None)


def _overloads(name: str) -> Iterator[Any]:
    import torch

    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return
    # out= overloads last: the profiler names an op without its overload, and a plain call is the
    # common one (an out= overload would take a recorded input as its out and resize it).
    for o in sorted(packet.overloads(), key=lambda o: o.endswith("out")):
        try:
            op = getattr(packet, o)
            op._schema  # noqa: B018  (TorchScript-only overloads raise here)
        except (RuntimeError, AttributeError):
            continue
        yield op


def _rank(rec: Record) -> int:
    ranks = [len(d) for d, dt in zip(rec.dims, rec.dtypes) if dt is not None]
    ranks += [len(x) for d, t in zip(rec.dims, rec.types) if t == "TensorList" for x in d if isinstance(x, list)]
    return max(ranks, default=0)


def _fit(op: Any, rec: Record) -> list[list[Any]] | None:
    """Per schema argument, the values to try; None: the overload does not take these arguments."""
    args = op._schema.arguments
    if len(args) != len(rec):
        return None
    rank = _rank(rec)
    out = []
    for i, a in enumerate(args):
        c = _candidates(rec, i, a, rank)
        if c is None:
            return None
        out.append(c)
    return out


# --- running and counting -----------------------------------------------------------------------
def _build(spec: Any) -> Any:
    import torch

    if isinstance(spec, tuple) and spec and spec[0] == "T":
        return torch.empty(spec[1], dtype=getattr(torch, spec[2]), device="meta")
    if isinstance(spec, list):
        return [_build(s) for s in spec]
    return spec


def _tensors(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def _nbytes(ts: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _flops(op: Any, values: list[Any], kwargs: dict, out: Any, read_ts: list[Any]) -> tuple[int, int]:
    """(flops, matmul_flops) by docs/costs.md: flop_counter's formulas for matmul-like ops, 1 per
    output element for pointwise ops, 1 per input element for reductions, else 0."""
    import torch

    from .convention import REDUCTIONS, ZERO_FLOP_POINTWISE, matmul_formula

    formula = matmul_formula(op)
    if formula is not None:
        from torch.utils.flop_counter import flop_registry

        if op.overloadpacket in flop_registry:
            f = int(flop_registry[op.overloadpacket](*values, **kwargs, out_val=out))
            return f, f
        return 0, 0
    name = op.overloadpacket.__name__
    base = name[len("_foreach_"):] if name.startswith("_foreach_") else name
    if base in REDUCTIONS or base.rstrip("_") in REDUCTIONS or torch.Tag.reduction in op.tags:
        first = _tensors(values[0]) if values else []
        return sum(t.numel() for t in first), 0
    pointwise = torch.Tag.pointwise in op.tags
    if not pointwise and base != name:  # a _foreach_ op counts as its per-tensor op
        pointwise = any(torch.Tag.pointwise in o.tags for o in _overloads(base.rstrip("_")))
    if pointwise and base.rstrip("_") not in ZERO_FLOP_POINTWISE and name not in ZERO_FLOP_POINTWISE:
        written = _tensors(out) or read_ts
        return sum(t.numel() for t in written), 0
    return 0, 0


def _run(op: Any, values: list[Any]) -> OpCost:
    """Call ``op`` on meta tensors built from ``values`` (one per schema argument); its cost."""
    schema = op._schema
    built = [_build(v) for v in values]
    pos = [b for a, b in zip(schema.arguments, built) if not a.kwarg_only]
    kw = {a.name: b for a, b in zip(schema.arguments, built) if a.kwarg_only}
    out = op(*pos, **kw)
    for a, v, b in zip(schema.arguments, values, built):
        if a.is_out and isinstance(v, tuple) and tuple(b.shape) != v[1]:
            raise ValueError(f"out argument {a.name} resized")  # not this overload
    name = op.overloadpacket.__name__
    read: list[Any] = []
    written: list[Any] = []
    partial = SCATTER_WRITES.get(name)
    extra_read = 0
    for a, b in zip(schema.arguments, built):
        ts = _tensors(b)
        is_write = a.alias_info is not None and a.alias_info.is_write
        if not is_write:
            read += ts
        elif partial is not None and a.name == "self":
            src = next((x for aa, x in zip(schema.arguments, built) if aa.name == partial[0]), None)
            n = sum(t.numel() for t in _tensors(src)) * (ts[0].element_size() if ts else 0)
            by_name = {aa.name: x for aa, x in zip(schema.arguments, built)}
            extra_read += n if scatter_accumulates(partial, by_name) else 0
            written.append(("bytes", n))
        else:
            written += ts
            if not (a.is_out or (a.name == "self" and name in _WRITE_ONLY_SELF)):
                read += ts
    returns = schema.returns
    if _is_view(op) or name in _ALLOCATIONS:
        return OpCost(0, 0, 0, 0, _dtype(read))  # a view or an allocation: no bytes move
    fresh = [t for r, t in zip(returns, out if len(returns) > 1 else (out,)) if r.alias_info is None] \
        if returns else []
    new_out = [t for x in fresh for t in _tensors(x)]
    nbytes_written = sum(x[1] if isinstance(x, tuple) else x.numel() * x.element_size() for x in written)
    nbytes_written += _nbytes(new_out)
    result = (new_out or [x for x in written if not isinstance(x, tuple)] or [None])[0]
    if read and result is not None and reads_converted_input(name, _dtype(read[:1]), _dtype([result])):
        extra_read += read[0].numel() * (result.element_size() - read[0].element_size())  # the copy it reads
    flops, mm = _flops(op, pos, kw, out, [x for x in written if not isinstance(x, tuple)])
    return OpCost(flops, mm, _nbytes(read) + extra_read, nbytes_written, _dtype(read + new_out))


def _is_view(op: Any) -> bool:
    """Every output aliases an input and nothing is written: a view (``view``, ``transpose``,
    ``expand``, ``as_strided``, ``split``...), which moves no bytes."""
    import torch

    if torch.Tag.inplace_view in op.tags:  # as_strided_, squeeze_, t_...: only the metadata changes
        return True
    schema = op._schema
    return bool(schema.returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                        for r in schema.returns) \
        and not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _dtype(ts: list[Any]) -> str:
    for t in ts:
        if t.is_floating_point():
            return str(t.dtype).replace("torch.", "")
    return str(ts[0].dtype).replace("torch.", "") if ts else "float32"


def _tries(cands: list[list[Any]]) -> Iterator[list[Any]]:
    if math.prod(len(c) for c in cands) > _MAX_TRIES:
        raise Refused(NO_SHAPES)
    for combo in itertools.product(*cands):
        yield list(combo)


def _composite(op: Any) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"))
    except RuntimeError:
        return False


# Host-side ops with no device work, whose meta kernels warn on stderr (is_pinned's device argument).
_HOST_ONLY = frozenset({"pin_memory", "_pin_memory", "is_pinned"})


def evaluate(name: str, args: dict) -> OpCost | str:
    """The cost of ``aten::<name>`` with the recorded ``args``, or the reason it has none (one of
    model.events.NOT_COSTED_REASONS, ``unknown_dtype:<type>`` for an unknown dtype). Imports torch."""
    if name in _HOST_ONLY:
        return UNKNOWN_OP
    try:
        rec = Record(args)
    except Refused as e:
        return e.reason
    _import_torch_elsewhere(("torch", "torch.utils.flop_counter"))
    with warnings.catch_warnings(), _quiet_stderr():
        warnings.simplefilter("ignore")  # torch's deprecation notes about argument combinations we try
        return _evaluate(name, rec)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence fd 2 while torch tries a signature: its C++ kernels print warnings straight to stderr,
    past Python's filters. Once per signature; another thread's stderr in that window is lost."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _evaluate(name: str, rec: Record) -> OpCost | str:
    import torch

    fits = [op for op in _overloads(name) if len(op._schema.arguments) == len(rec)]
    if fits and all(_is_view(op) for op in fits):
        return OpCost(0, 0, 0, 0, next((dt for dt in rec.dtypes if dt is not None), rec.list_dtype))
    refusal = None
    found_op = False
    for op in _overloads(name):
        found_op = True
        try:
            cands = _fit(op, rec)
            if cands is None:
                continue
            if torch.Tag.dynamic_output_shape in op.tags or torch.Tag.data_dependent_output in op.tags:
                return UNKNOWN_OP  # the output's size depends on the values: meta tensors cannot say
            if _composite(op) and not all(_is_view(o) for o in fits):
                # A composite op launches nothing itself: its children (recorded too) carry the
                # kernels. Decided before running it: its decomposition may warn on meta tensors.
                return UNKNOWN_OP
            costs: dict[OpCost, None] = {}  # distinct, in the order tried (a set's order is the hashes')
            for values in _tries(cands):
                try:
                    costs[_run(op, values)] = None
                except Exception as e:  # torch's shape checks refuse this combination
                    log.debug("aten::%s%s: %s", name, values, e)
        except Refused as e:
            refusal = refusal or e.reason
            continue
        if len(costs) == 1:
            return next(iter(costs))
        if costs:
            return lower_bound(list(costs))  # unrecorded values decide the cost: the least of them
        refusal = refusal or BAD_SHAPES
    if not found_op:
        return UNKNOWN_OP
    return refusal or BAD_SHAPES


# --- the cache ----------------------------------------------------------------------------------
def cache_dir() -> Path:
    """``$INDUCTOR_PERF_CACHE_DIR`` or ``~/.cache/inductor_perf`` (as calibration)."""
    configured = config.get_str(config.CACHE_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "inductor_perf"


@functools.lru_cache(maxsize=1)  # importlib.metadata parses a file per call
def _torch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def signature(name: str, args: dict) -> str:
    """The cache key of an op event: its name and recorded dims, types and concrete values."""
    return json.dumps([name, args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs")],
                      separators=(",", ":"), allow_nan=False, default=str)


class DiskCache:
    """Signature -> cost, kept in a JSON-lines file per torch version and :data:`RULES_VERSION`.

    Appends one line per newly evaluated signature (appends of a short line are atomic, so two
    processes can share the file); a line that does not parse is ignored."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, OpCost | str] = {}
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            text = path.read_text()
        except OSError:
            return
        for line in text.splitlines():
            try:
                key, val = json.loads(line)
                self.entries[key] = val if isinstance(val, str) else OpCost(*val)
            except (ValueError, TypeError):
                continue

    def get(self, key: str) -> OpCost | str | None:
        return self.entries.get(key)

    def put(self, key: str, val: OpCost | str) -> None:
        self.entries[key] = val
        if self.path is None:
            return
        v = val if isinstance(val, str) else [val.flops, val.matmul_flops, val.bytes_read, val.bytes_written,
                                              val.dtype] + ([val.bound] if val.bound is not None else [])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps([key, v]) + "\n")
        except OSError as e:
            log.debug("op cost cache %s not written (%s)", self.path, e)
            self.path = None


_CACHE: dict[str, DiskCache] = {}
"""The disk cache of each cache file already opened in this process (a memo of files, not state
of a session: every entry is a pure function of its key)."""


def _cache() -> DiskCache:
    path = cache_dir() / f"op_meta-v{RULES_VERSION}-torch-{_torch_version()}.jsonl"
    key = str(path)
    c = _CACHE.get(key)
    if c is None or c.path is None and os.path.exists(key):
        c = _CACHE[key] = DiskCache(path)
    return c


PENDING = "pending"
""":func:`meta_cost`'s answer, after :func:`defer_torch`, for a signature the cache does not hold."""
_defer = False


def defer_torch(on: bool = True) -> None:
    """Never run torch in this process: a signature not in the cache is :data:`PENDING`. The fast
    path's forked worker does this, so that torch is imported (and its C++ warnings printed) at most
    once, in the parent, and each signature is evaluated once."""
    global _defer
    _defer = on


def meta_cost(name: str, args: dict) -> OpCost | str:
    """:func:`evaluate` through the cache: torch runs only for a signature never seen with this
    torch version."""
    try:
        key = signature(name, args)
    except (TypeError, ValueError):
        return PENDING if _defer else evaluate(name, args)
    cache = _cache()
    got = cache.get(key)
    if got is None:
        if _defer:
            return PENDING
        got = evaluate(name, args)
        cache.put(key, got)
    return got


# --- every op ------------------------------------------------------------------------------------
def wants_cost(name: str) -> bool:
    """Whether an op of this name may have a cost here (every aten op, and the non-aten ops of
    :mod:`inductor_perf.costs.ops.fbgemm`): decided without torch, for every CPU op of a trace."""
    return name.startswith(ATEN_PREFIX) or ext_formula(name) is not None


def op_cost_or_reason(name: Any, args: Any) -> OpCost | str | None:
    """FLOPs and bytes of one profiler op event: the hand formula of
    :data:`~inductor_perf.costs.ops.formulas.OP_FORMULAS`, a rule of :mod:`~inductor_perf.costs.ops.fbgemm`,
    else torch's shape rules (:func:`meta_cost`). An op none of them can cost gives the reason (one
    of model.events.NOT_COSTED_REASONS; ``unknown_dtype:<type>`` names the type). None: nothing to cost
    (a non-string name; a view or an allocation, whose cost is 0 in :func:`meta_cost`)."""
    if not isinstance(name, str):
        return None
    if name.startswith(ATEN_PREFIX):
        short = name[len(ATEN_PREFIX):]
        if short in OP_FORMULAS:
            return formula_cost_or_reason(name, args)
        if not isinstance(args, dict) or not isinstance(args.get("Input Dims"), list):
            return NO_SHAPES
        try:
            got = meta_cost(short, args)
        except Exception as e:  # never let one op's record stop a trace: torch may raise anything
            log.debug("%s: not costed (%s: %s)", name, type(e).__name__, e)
            return BAD_SHAPES
        # A view or an allocation moves nothing: not a cost that could stand for the op around it
        # (an op's cost goes to its innermost costed op).
        if isinstance(got, OpCost) and not (got.flops or got.bytes_read or got.bytes_written):
            return None
        return got
    got = ext_cost_or_reason(name, args)
    return UNKNOWN_OP if got is None else got
