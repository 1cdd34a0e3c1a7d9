"""The op x shape table of a summary: one row per distinct (launching op, input shapes, input dtypes),
with its calls, time, FLOPs, bytes, achieved rates and % of the roof that binds it, most time first.

Which op and which time, by the summary's kernel definition (:data:`~.kernels.KERNEL_DEFINITIONS`):

- GPU: the device time of the kernels each op launched. A kernel's op is the CPU op (``cat``
  ``cpu_op``) around the runtime call with the kernel's correlation id: the innermost one named by
  the kernel's ``launch_op`` (the cost join's choice), else the innermost one; its ``Input Dims``
  and ``Input type`` are the shapes and dtypes. A kernel Inductor generated (``kernel_kind``
  ``generated``) is keyed by the eager ops it fuses (``eager_ops``, else its own name), with
  "compiled" for its shapes: it has no recorded inputs of its own.
- CPU: each kernel is an op itself, keyed by its own recorded inputs; a compiled-graph kernel
  without them by its ``eager_ops`` (else its name) with "compiled" shapes.

A row's calls are its distinct launching ops (a GPU op that launched two kernels is one call);
FLOPs and bytes are the sums of its kernels' costs, placed against the device's roofs by the one
rule every kernel row uses (:func:`~.roofs.row_placement`). Both engines fill one
:class:`OpShapeSums` as they sum their kernels (``SummaryParts.op_shapes``), and
:func:`inductor_perf.summary.core.assemble` makes its rows. Pure and torch-free.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..costs.ops.formulas import parse_dtype_name
from ..model import events as evs
from ..roofline.roofs import Roofs
from .kernels import DEF_GPU, ParsedEvent, TraceKernels, _hashable, counts_flops
from .roofs import row_placement
from .rows import _dominant, rounded, six_digits

try:
    from orjson import dumps as _DUMPS
except ImportError:  # pragma: no cover - orjson is a dependency
    def _DUMPS(v: Any) -> bytes:
        return json.dumps(v, separators=(",", ":")).encode()

COMPILED = "compiled"
"""The shapes of a compiled kernel's row: it has no recorded inputs of its own."""
NO_OP = "(no launching op)"
"""The op of a device event no CPU op launched (a CUDA-graph replay, a lost correlation id)."""

ShapeKey = tuple[str, str | None, str | None]
"""(op, shapes, dtypes): shapes is the ``Input Dims`` as compact JSON, :data:`COMPILED`, or None
(unknown: the op recorded no shapes); dtypes the ``Input type`` entries joined by ", " (None: unknown)."""


@dataclass
class OpShapeRow:
    """One distinct (op, input shapes, input dtypes), summed over its calls."""

    op: str
    shapes: str | None
    """``Input Dims`` as compact JSON (``[[2048,512],[512,2048]]``), "compiled", or None: unknown."""
    dtypes: str | None
    """``Input type`` entries, the empty ones left out (``c10::BFloat16, c10::BFloat16``); None: unknown."""
    calls: int
    """Distinct launching ops (GPU), or kernels (CPU)."""
    kernels: int
    total_us: float
    """Device time of the kernels these calls launched (GPU), the kernels' own time (CPU)."""
    mean_us: float
    """``total_us`` / ``calls``."""
    flop: float | None
    gb: float | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    pct_of_roof: float | None
    """% of the roof that binds the row (:func:`~.roofs.row_placement`); None without device roofs."""
    roof: str | None = None
    """That roof's name (a memory level such as ``HBM``, or a compute roof such as ``bfloat16 matrix``)."""
    above_roof_reason: str | None = None


@dataclass
class _Sums:
    calls: set[int] = field(default_factory=set)
    """The ids of the distinct calls, until :meth:`OpShapeSums.done` counts them."""
    n_calls: int = 0
    """Their number, once :meth:`OpShapeSums.done`."""
    kernels: int = 0
    time: float = 0.0
    flop: float | int | None = None
    flop_time: float = 0.0
    gb: float | None = None
    gb_time: float = 0.0
    kind: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    dtype: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    memory_roof: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))


def _dims_text(dims: Any) -> str | None:
    """``Input Dims`` as compact JSON (ASCII: its entries are ints and lists)."""
    if not isinstance(dims, list):
        return None
    try:
        return _DUMPS(dims).decode()
    except TypeError:  # an int past 64 bits (orjson.JSONEncodeError is a TypeError)
        return json.dumps(dims, separators=(",", ":"))


_TYPES: dict[tuple, str] = {}
""":func:`_types_text` by its ``Input type`` entries (a trace has few distinct ones; bounded)."""


def _types_text(types: Any) -> str | None:
    if not isinstance(types, list):
        return None
    try:
        key = tuple(types)
        got = _TYPES.get(key)
    except TypeError:  # an entry that cannot be hashed
        key, got = None, None
    if got is None:
        got = ", ".join(t for t in types if isinstance(t, str) and t)
        if key is not None and len(_TYPES) < 65536:
            _TYPES[key] = got
    return got


def shape_key(name: str, dims: Any, types: Any) -> ShapeKey:
    """The :data:`ShapeKey` of a CPU op named ``name`` whose args' ``Input Dims`` is ``dims`` and
    ``Input type`` is ``types`` (None: the op recorded none)."""
    return (name, _dims_text(dims), _types_text(types))


def raw_shape_key(name: str, dims: bytes | None, types: bytes | None) -> ShapeKey:
    """:func:`shape_key` from the JSON text of the two args (None: absent), as the streaming pass
    reads them (:mod:`inductor_perf.summary.stream.loop`)."""
    from orjson import loads  # only the streaming engine calls this, and it runs only with orjson

    return shape_key(name, loads(dims) if dims is not None else None, loads(types) if types is not None else None)


def _compiled_key(k: ParsedEvent) -> ShapeKey:
    ops = k.args.get(evs.EAGER_OPS)
    return (ops if isinstance(ops, str) and ops else k.name, COMPILED, None)


def _op_key(op: ParsedEvent) -> ShapeKey:
    return shape_key(op.name, op.args.get("Input Dims"), op.args.get("Input type"))


def _launching_op(runtime: ParsedEvent | None, name: Any) -> ParsedEvent | None:
    """The innermost CPU op around ``runtime`` named ``name`` (when a str), else the innermost one."""
    p = runtime.parent if runtime is not None else None
    first = None
    while p is not None:
        if p.cat == "cpu_op":
            if not isinstance(name, str) or p.name == name:
                return p
            first = first or p
        p = p.parent
    return first


def shape_keys(tk: TraceKernels) -> dict[int, tuple[ShapeKey, int]]:
    """Each kernel's (:data:`ShapeKey`, ``id`` of its call), by ``id`` of the kernel."""
    out: dict[int, tuple[ShapeKey, int]] = {}
    if tk.definition == DEF_GPU:
        by_corr: dict[Any, ParsedEvent] = {}
        for e in tk.host_events:
            corr = e.args.get("correlation")
            if corr is not None and evs.is_runtime(e.cat):
                by_corr[_hashable(corr)] = e
        for k in tk.kernels:
            if k.args.get(evs.KERNEL_KIND) == "generated":
                out[id(k)] = (_compiled_key(k), id(k))
                continue
            corr = k.args.get("correlation")
            op = _launching_op(by_corr.get(_hashable(corr)) if corr is not None else None, k.args.get(evs.LAUNCH_OP))
            if op is not None:
                out[id(k)] = (_op_key(op), id(op))
            elif evs.KERNEL_KIND in k.args:
                out[id(k)] = (_compiled_key(k), id(k))
            else:
                launch = k.args.get(evs.LAUNCH_OP)
                out[id(k)] = ((launch if isinstance(launch, str) else NO_OP, None, None), id(k))
        return out
    for k in tk.kernels:
        if isinstance(k.args.get("Input Dims"), list) or evs.KERNEL_KIND not in k.args and not k.name.startswith("graph_"):
            out[id(k)] = (_op_key(k), id(k))
        else:
            out[id(k)] = (_compiled_key(k), id(k))
    return out


_GENERATED = object()
"""In :func:`streamed_shape_keys`, the launch_op of a kernel Inductor generated (keyed by its eager ops)."""


def streamed_shape_keys(seen: Any, labels: Mapping[int, Mapping[str, Any]] | None) -> dict[int, tuple[ShapeKey, int]]:
    """:func:`shape_keys` of a streamed GPU trace (:mod:`inductor_perf.summary.stream.finish`), the same
    rule from what its pass kept instead of the events: ``seen`` (``summary.stream.engine._Pass``)
    has the kernels and their event indices, each kernel's launch call's event index (``kernel_call``,
    -1: none), and the host events' columns with each CPU op's key number (``seen.shape_ids``),
    whose nesting gives each runtime call's enclosing ops (``seen.threads.enclosing_ops``); ``labels``
    the kernels' ``launch_op`` labels when the summary placed the costs (else the kernel's own arg).
    No event is read again: this runs after the pass, on what it kept."""
    keys = list(seen.shape_ids)
    out: dict[int, tuple[ShapeKey, int]] = {}
    kernels = seen.kernels
    names: list[Any] = [_GENERATED] * len(kernels)  # each kernel's launch_op, by its position
    wanted: dict[int, int | list[int]] = {}  # runtime call -> the position of its kernel (several: a list)
    for n, (k, i, r) in enumerate(zip(kernels, seen.kernel_index, seen.kernel_call)):
        args = k.args
        if args.get(evs.KERNEL_KIND) == "generated":
            out[id(k)] = (_compiled_key(k), id(k))
            continue
        lab = labels.get(i) if labels else None
        name = names[n] = lab.get(evs.LAUNCH_OP) if lab else args.get(evs.LAUNCH_OP)
        if r >= 0:
            had = wanted.get(r)
            wanted[r] = n if had is None else [*had, n] if type(had) is list else [had, n]
    op_names = [key[0] for key in keys]
    for r, ops in seen.threads.enclosing_ops(wanted):
        if not ops:
            continue
        had = wanted[r]
        for n in had if type(had) is list else (had,):
            # _launching_op: the innermost CPU op named launch_op (when a str), else the innermost one
            name = names[n]
            p, s = ops[0]
            if isinstance(name, str) and op_names[s] != name:
                for q, t in ops:
                    if op_names[t] == name:
                        p, s = q, t
                        break
            out[id(kernels[n])] = (keys[s], p)
    for k, name in zip(kernels, names):
        if name is not _GENERATED and id(k) not in out:  # no CPU op launched it
            out[id(k)] = ((_compiled_key(k), id(k)) if evs.KERNEL_KIND in k.args else
                          ((name if isinstance(name, str) else NO_OP, None, None), id(k)))
    return out


class OpShapeSums:
    """The table's running sums, filled by either engine as it sums its kernels (the in-memory one:
    :func:`shape_sums`; the streaming one while it folds its kernels' costs), and its rows."""

    def __init__(self, keys: Mapping[int, tuple[ShapeKey, int]]) -> None:
        self.keys = keys
        """Each kernel's (key, call) by ``id``: :func:`shape_keys` or :func:`streamed_shape_keys`."""
        self.table: dict[ShapeKey, _Sums] = {}

    def add(self, k: ParsedEvent, st: tuple, kind: str) -> None:
        """Sum kernel ``k`` of ``kind``, whose :func:`~.core.static_sums` are ``st``."""
        self.add_many([k], st, kind)

    def add_many(self, members: Iterable[ParsedEvent], st: tuple, kind: str) -> None:
        """Sum kernels sharing one kind and :func:`~.core.static_sums` ``st`` (FLOPs, GB; 5: dtype, 8: memory
        roof); FLOPs as :func:`~.kernels.counts_flops` counts them."""
        flop, gb, dtype, memory_roof = st[0], st[1], st[5], st[8]
        keys, table = self.keys, self.table
        for k in members:
            # a copy's, a fill's or a collective's 0 FLOPs leave the row's FLOPs unknown (as a module row's)
            flop = st[0] if counts_flops(st[0], kind, k.cat) else None
            key, call = keys[id(k)]
            s = table.get(key)
            if s is None:
                s = table[key] = _Sums()
            dur = k.dur
            s.calls.add(call)
            s.kernels += 1
            s.time += dur
            s.kind[kind] += dur
            if flop is not None:
                s.flop = (s.flop or 0) + flop
                s.flop_time += dur
            if gb is not None:
                s.gb = (s.gb or 0.0) + gb
                s.gb_time += dur
            if dtype is not None:
                s.dtype[dtype] += dur
            if memory_roof is not None:
                s.memory_roof[memory_roof] += dur

    def done(self) -> None:
        """Once every kernel is summed: let the kernels' keys go, and keep each row's number of calls
        instead of their ids (all that :meth:`rows` reads of them). Nothing can be added after."""
        self.keys = {}
        for s in self.table.values():
            if s.calls:  # every row has a call: empty once counted
                s.n_calls += len(s.calls)
                s.calls = set()

    def rows(self, roofs: Roofs | None, top: int) -> list[OpShapeRow]:
        """The ``top`` rows, most time (as shown, rounded) first, then by key (:meth:`done` first,
        when it was not called)."""
        self.done()
        table = self.table
        order = sorted(table, key=lambda key: (-rounded(table[key].time), key[0], key[1] or "", key[2] or ""))
        rows = []
        for key in order[:top]:
            s = table[key]
            tflops = six_digits(s.flop / s.flop_time / 1e6) if s.flop is not None and s.flop_time > 0 else None
            gbps = six_digits(s.gb / s.gb_time * 1e6) if s.gb is not None and s.gb_time > 0 else None
            p = row_placement(s.flop, s.gb, s.flop_time, s.gb_time, s.kernels, _dominant(s.dtype),
                              _dominant(s.kind), _dominant(s.memory_roof), roofs, None)
            rows.append(OpShapeRow(
                op=key[0], shapes=key[1], dtypes=key[2], calls=s.n_calls, kernels=s.kernels,
                total_us=rounded(s.time), mean_us=rounded(s.time / s.n_calls), flop=s.flop,
                gb=six_digits(s.gb), achieved_tflops=tflops, achieved_gbps=gbps,
                pct_of_roof=p.pct_of_roof if p is not None else None, roof=p.roof if p is not None else None,
                above_roof_reason=p.above_roof_reason if p is not None else None))
        return rows


def launch_dtype(key: ShapeKey) -> str | None:
    """The dtype the op of ``key`` ran in, from its recorded ``Input type``: the first floating-point
    entry, the one a cost from shapes takes (:mod:`inductor_perf.costs.ops.meta`); None when it
    recorded none (a compiled kernel's key, an op without recorded inputs).

    >>> launch_dtype(("aten::addmm", "[[512],[2048,512],[512,1536]]", "c10::BFloat16, c10::BFloat16, c10::BFloat16"))
    'bfloat16'
    >>> launch_dtype(("aten::embedding", "[[4096,256],[8,128]]", "float, long int")), launch_dtype(("x", None, None))
    ('float32', None)
    """
    for entry in key[2].split(", ") if key[2] else ():
        name = parse_dtype_name(entry)
        if name is not None and (name.startswith("float") or name == "bfloat16"):
            return name
    return None


def fill_launch_dtypes(kernels: Iterable[Any], keys: Mapping[int, tuple[ShapeKey, int]]) -> int:
    """Give each kernel that does arithmetic (``kernel_flop`` above 0) and has no ``kernel_dtype`` its
    launching op's :func:`launch_dtype`, so that it is placed against its dtype's roof, not float32's:
    a trace augmented before ``kernel_dtype`` was written (its bf16 GEMMs would read several times
    the float32 roof). The kernel gets new args; the trace's own dicts are left as they are. ``keys``:
    :func:`shape_keys` or :func:`streamed_shape_keys`. Returns how many kernels got one."""
    filled = 0
    for k in kernels:
        args = k.args
        flop = args.get(evs.KERNEL_FLOP)
        if evs.KERNEL_DTYPE in args or type(flop) not in (int, float) or not flop > 0:
            continue
        got = keys.get(id(k))
        dtype = launch_dtype(got[0]) if got is not None else None
        if dtype is not None:
            k.args = {**args, evs.KERNEL_DTYPE: dtype}
            filled += 1
    return filled


def launch_dtypes_note(filled: int) -> str | None:
    """The summary's note for :func:`fill_launch_dtypes`' count (None: none filled)."""
    if not filled:
        return None
    return (f"{filled} kernel(s) with FLOPs carry no kernel_dtype (augmented by an older inductor_perf, or their "
            "cost had none): each is placed against the roof of its launching op's recorded input dtype")


def shape_sums(tk: TraceKernels, kinds: Mapping[int, str], static: Callable[[Mapping[str, Any]], tuple],
               keys: Mapping[int, tuple[ShapeKey, int]] | None = None) -> OpShapeSums:
    """The in-memory engine's :class:`OpShapeSums`: ``keys`` (default :func:`shape_keys`), each kernel
    summed with its ``kinds`` entry and ``static`` (:func:`~.core.static_sums`) of its args."""
    sums = OpShapeSums(shape_keys(tk) if keys is None else keys)
    for k in tk.kernels:
        sums.add(k, static(k.args), kinds[id(k)])
    sums.done()
    return sums


__all__ = ["COMPILED", "NO_OP", "OpShapeRow", "ShapeKey", "OpShapeSums", "fill_launch_dtypes", "launch_dtype",
           "launch_dtypes_note", "raw_shape_key", "shape_key", "shape_keys", "shape_sums", "streamed_shape_keys"]
