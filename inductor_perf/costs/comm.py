"""Collectives in a plain profiler trace: which kernels are NCCL / RCCL collectives, what each moved
and how fast, with nccl-tests' definitions (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md).

A collective's op and message size come, first found wins, from

1. the kernel's own args (newer Kineto): ``Collective name``, ``In msg nelems``, ``Out msg nelems``,
   ``Group size``, ``dtype``;
2. the enclosing ``record_param_comms`` CPU op, which carries the same args in newer traces;
3. the enclosing ``nccl:<collective>`` record function (a user annotation around the launch), whose
   ``Input Dims`` / ``Input type`` are the collective's input tensors.

The group size comes from the same args (``Group size``), else from the trace's ``distributedInfo``:
the ``pg_config`` entry whose ``pg_name`` the op names (``Process Group Name``), else the only entry
of ``pg_config`` when it lists one group, else ``world_size``. :func:`comm_cost` says which.

Bus bandwidth (``busbw = algbw * factor``) makes collectives of different sizes and group sizes
comparable with the link's peak; the factor and what S counts, per collective (n ranks):

============== ============== ================================================================
collective     factor         S (bytes)
============== ============== ================================================================
all_reduce     2(n-1)/n       the reduced tensor
all_gather     (n-1)/n        the gathered output: n x each rank's input
reduce_scatter (n-1)/n        the reduced input: n x each rank's output
all_to_all     (n-1)/n        each rank's whole send buffer (n chunks)
broadcast      1              the broadcast tensor
reduce         1              the reduced tensor
send / recv    1              the tensor sent or received
============== ============== ================================================================

Pure and torch-free: dtypes are sized by name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..model import events as evs
from ..model.event_cost import CommCost
from .ops.formulas import parse_dtype_name

# Kernel names NCCL and RCCL give their collective kernels ("ncclKernel_AllReduce_RING_LL_Sum_float",
# "ncclDevKernel_SendRecv(...)", "void ncclKernel_...", RCCL's "rccl..." / "ncclDevKernel_Generic").
_KERNEL_NAME = re.compile(r"^(?:void\s+)?(?:nccl(?:Dev)?Kernel|rccl)", re.IGNORECASE)
# The collective a kernel's name spells, in the order they must be tried (AllReduce before Reduce).
_NAME_OPS = (("allreduce", "all_reduce"), ("reducescatter", "reduce_scatter"), ("allgather", "all_gather"),
             ("alltoall", "all_to_all"), ("sendrecv", "send_recv"), ("broadcast", "broadcast"),
             ("reduce", "reduce"), ("send", "send"), ("recv", "recv"))

# c10::ScalarType names (record_param_comms' ``dtype``) -> bytes per element.
_SCALAR_TYPE_SIZES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8,
}
# torch dtype names (costs.ops.formulas.parse_dtype_name of an ``Input type``) -> bytes per element.
_DTYPE_SIZES = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1, "complex64": 8, "complex128": 16,
    "complex32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}

RPC_NAME = "record_param_comms"
ANNOTATION_PREFIX = "nccl:"


@dataclass(frozen=True)
class CommInfo:
    """What one source (kernel args, ``record_param_comms``, ``nccl:*``) says about a collective;
    None where it says nothing."""

    op: str | None
    nbytes: int | None
    """S, per the table of the module docstring, when the source sizes it without the group size."""
    in_bytes: int | None = None
    """The input's bytes when S needs the group size (an ``nccl:all_gather`` input is one chunk)."""
    group_size: int | None = None
    pg_name: str | None = None


def is_comm_kernel(name: Any) -> bool:
    """Whether a device kernel's name is an NCCL / RCCL collective kernel's."""
    return isinstance(name, str) and _KERNEL_NAME.match(name) is not None


def normalize_op(name: Any) -> str | None:
    """The collective of a ``Collective name`` / ``nccl:*`` name / kernel name, in nccl-tests'
    terms: ``"_allgather_base"``, ``"all_gather_into_tensor_coalesced"`` -> ``"all_gather"``.

    >>> normalize_op("nccl:_reduce_scatter_base"), normalize_op("ncclKernel_AllReduce_RING_LL_Sum_float")
    ('reduce_scatter', 'all_reduce')
    """
    if not isinstance(name, str):
        return None
    s = name.lower()
    if s.startswith(ANNOTATION_PREFIX):
        s = s[len(ANNOTATION_PREFIX):]
    s = re.sub(r"^(?:void\s+)?(?:nccl(?:dev)?kernel|rccl\w*?kernel)?_?", "", s)
    s = s.replace("_", "")
    for key, op in _NAME_OPS:
        if s.startswith(key) or (key in s and key not in ("send", "recv", "reduce")):
            return op
    return None


def _int(v: Any) -> int | None:
    """A non-negative int from a number or a numeric string ("2560"), else None."""
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            return None
    n = evs.number(v)
    return int(n) if n is not None and n >= 0 and n == int(n) else None


def _itemsize(dtype: Any) -> int | None:
    if not isinstance(dtype, str):
        return None
    size = _SCALAR_TYPE_SIZES.get(dtype)
    return size if size is not None else _DTYPE_SIZES.get(parse_dtype_name(dtype) or "")


def from_args(args: Mapping[str, Any]) -> CommInfo | None:
    """What a kernel's or a ``record_param_comms`` op's args say (None: no ``Collective name``):
    S = max(In, Out msg nelems) x the dtype's size, which is the table's S for every collective
    (an all-gather's output is n inputs, a reduce-scatter's input n outputs)."""
    op = normalize_op(args.get("Collective name"))
    if op is None:
        return None
    n_in, n_out = _int(args.get("In msg nelems")), _int(args.get("Out msg nelems"))
    size = _itemsize(args.get("dtype"))
    nelems = max((x for x in (n_in, n_out) if x is not None), default=None)
    nbytes = nelems * size if nelems is not None and size is not None else None
    pg = args.get("Process Group Name")
    return CommInfo(op, nbytes, None, _int(args.get("Group size")) or None, pg if isinstance(pg, str) else None)


def from_annotation(name: str, args: Mapping[str, Any]) -> CommInfo:
    """What an ``nccl:<collective>`` record function says: the collective, and the bytes of its
    input tensors (``Input Dims`` x ``Input type``; None when a dim or dtype is missing)."""
    op = normalize_op(name)
    dims, types = args.get("Input Dims"), args.get("Input type")
    total: int | None = None
    if isinstance(dims, list) and isinstance(types, list) and dims:
        total = 0
        for shape, t in zip(dims, types):
            size = _itemsize(t)
            if not isinstance(shape, list) or size is None or not all(_int(d) is not None for d in shape):
                total = None
                break
            total += math.prod(int(d) for d in shape) * size
    if op == "all_gather":  # the input is this rank's chunk: S = n chunks, once n is known
        return CommInfo(op, None, total)
    return CommInfo(op, total)


def group_from_trace(info: Mapping[str, Any] | None, pg_name: str | None) -> tuple[int | None, str | None]:
    """The group size ``distributedInfo`` gives for process group ``pg_name`` (None: unnamed), and
    which of its fields said it: "pg_config" or "world_size"; (None, None) when it says nothing."""
    if not isinstance(info, Mapping):
        return None, None
    pgs = info.get("pg_config")
    pgs = [p for p in pgs if isinstance(p, Mapping)] if isinstance(pgs, list) else []
    chosen = [p for p in pgs if pg_name is not None and str(p.get("pg_name")) == pg_name] or (
        pgs if len(pgs) == 1 else [])
    if chosen:
        p = chosen[0]
        n = _int(p.get("pg_size"))
        if n is None and isinstance(p.get("ranks"), list):
            n = len(p["ranks"])
        if n:
            return n, "pg_config"
    n = _int(info.get("world_size"))
    return (n, "world_size") if n else (None, None)


def comm_cost(kernel_name: str, sources: list[tuple[str, CommInfo]],
              dist_info: Mapping[str, Any] | None) -> CommCost | None:
    """The collective of a kernel from what its sources say, nearest first (``("kernel", info)``,
    ``("record_param_comms", info)``, ``("nccl_annotation", info)``); None when none of them sizes it.

    The op is the first source's that names one, else the kernel name's (an ncclKernel_SendRecv
    inside ``nccl:all_to_all`` is an all_to_all); the size, the first source that gives one.
    """
    op = next((i.op for _s, i in sources if i.op is not None), None) or normalize_op(kernel_name)
    group = next((i.group_size for _s, i in sources if i.group_size), None)
    group_source = "args" if group else None
    if group is None:
        pg = next((i.pg_name for _s, i in sources if i.pg_name is not None), None)
        group, group_source = group_from_trace(dist_info, pg)
    for source, info in sources:
        if info.nbytes is not None:
            nbytes = info.nbytes
        elif info.in_bytes is not None and group is not None:
            nbytes = info.in_bytes * group
        else:
            continue
        if op is None:
            return None
        return CommCost(op, nbytes, group, source, group_source)
    return None


def comm_args(cost: CommCost, dur_us: float | None, interconnect_gbs: float | None) -> dict[str, Any]:
    """The args of a collective kernel of ``dur_us``: its op, S, group size, algbw and busbw in GB/s
    and busbw as a % of ``interconnect_gbs`` (GB/s per direction; None: no %)."""
    a: dict[str, Any] = {evs.COMM_OP: cost.op, evs.COMM_BYTES: cost.nbytes}
    if cost.group_size is not None:
        a[evs.GROUP_SIZE] = cost.group_size
    if dur_us is not None and dur_us > 0:
        algbw = evs.number(cost.nbytes / (dur_us * 1e3))  # B / µs / 1e3 = GB/s
        if algbw is not None:
            a[evs.ALGBW_GBPS] = algbw
            factor = cost.bus_factor
            if factor is not None:
                busbw = algbw * factor
                a[evs.BUSBW_GBPS] = busbw
                if interconnect_gbs:
                    pct = evs.number(100.0 * busbw / interconnect_gbs)
                    if pct is not None:
                        a[evs.ACHIEVED_BANDWIDTH_PCT] = pct
    a[evs.MEMORY_ROOF] = "interconnect"
    return a
