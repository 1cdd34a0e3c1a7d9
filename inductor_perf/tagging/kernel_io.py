"""What a kernel moves and works on, read from Inductor's IR while the wrapper code is written.

:mod:`inductor_perf.tagging.collector` calls these for every kernel call site: the bytes a generated kernel
reads and writes (its KernelArgs, else its scheduler nodes' reads and writes), an extern kernel's
bytes from its IR node when no FX node gives them, and the work of a split reduction's later
stages. Like tagging, this reads private Inductor API pinned to the torch range in
:mod:`inductor_perf.compat`.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Sequence

from . import node_costs as costs


def find_kernel_args(max_depth: int = 6) -> Any | None:
    """The KernelArgs of the kernel being emitted, read from the codegen frames that called the
    hook: ``self.kernel_group.args`` (C++ scheduling) or a local ``kernel.args`` (SIMD/Triton).
    These list exactly the buffers the kernel reads and writes in memory."""
    from torch._inductor.codegen.common import KernelArgs

    frame = sys._getframe(2)
    for _ in range(max_depth):
        if frame is None:
            break
        loc = frame.f_locals
        kernel = loc.get("kernel")
        args = getattr(kernel, "args", None)
        if isinstance(args, KernelArgs):
            return args
        group = getattr(loc.get("self"), "kernel_group", None)
        args = getattr(group, "args", None)
        if isinstance(args, KernelArgs):
            return args
        frame = frame.f_back
    return None


def _buffer_bytes(name: str) -> costs.Expr:
    from torch._inductor.virtualized import V

    numel = costs.to_expr(V.graph.get_numel(name))
    return numel * V.graph.get_dtype(name).itemsize


def kernel_args_bytes(args: Any) -> tuple[costs.Expr, costs.Expr]:
    from torch._inductor.codegen.common import RemovedArg

    read: costs.Expr = 0
    written: costs.Expr = 0
    for name, inner in args.input_buffers.items():
        if not isinstance(inner, RemovedArg):
            read = read + _buffer_bytes(name)
    for name, inner in args.output_buffers.items():
        if not isinstance(inner, RemovedArg):
            written = written + _buffer_bytes(name)
    seen: set[str] = set()
    for name, buf in args.inplace_buffers.items():
        if isinstance(buf, RemovedArg) or buf.inner_name in seen:
            continue
        seen.add(buf.inner_name)
        size = _buffer_bytes(name)
        read, written = read + size, written + size
    return read, written


def read_writes_bytes(snodes: Sequence[Any]) -> tuple[costs.Expr, costs.Expr]:
    """Fallback when no KernelArgs is reachable: external reads of the fused nodes, and the writes
    that someone outside the kernel uses."""
    from torch._inductor.virtualized import V

    names = {s.get_name() for s in snodes}
    written_here: set[str] = set()
    for s in snodes:
        written_here.update(d.name for d in s.read_writes.writes)
    reads = {d.name for s in snodes for d in s.read_writes.reads} - written_here
    outputs = set(V.graph.get_output_names())
    sched = V.graph.scheduler
    materialized = set()
    for name in written_here:
        if name in V.graph.removed_buffers:
            continue
        buf = sched.name_to_buf.get(name) if sched is not None else None
        users = getattr(buf, "users", None) or []
        if name in outputs or any(getattr(u.node, "get_name", lambda: None)() not in names
                                  for u in users):
            materialized.add(name)
    read = sum((_buffer_bytes(n) for n in sorted(reads)), 0)
    written = sum((_buffer_bytes(n) for n in sorted(materialized)), 0)
    return read, written


def extern_ir_bytes(kernel: Any) -> tuple[costs.Expr, costs.Expr]:
    read: costs.Expr = 0
    for inp in getattr(kernel, "inputs", ()) or ():
        try:
            read = read + math.prod(costs.to_expr(s) for s in inp.get_size()) * inp.get_dtype().itemsize
        except Exception:
            continue
    try:
        written = math.prod(costs.to_expr(s) for s in kernel.get_size()) * kernel.get_dtype().itemsize
    except Exception:
        written = 0
    return read, written


def later_stage_work(sub: Any, graph: Any) -> costs.Expr | None:
    """Elements a later stage of one FX node's reduction reads, or None for any other IR node.

    When one reduction has too few outputs to fill the device, Inductor splits it
    (``Reduction.create_multilayer``): a first kernel reduces chunks of the input into partial
    results, a second one reduces those, and an epilogue of the same lowering (``mean``'s division)
    may follow. All of them carry the same FX origins, so counting the origins' FLOPs in each would
    count the whole reduction two or three times (on an H100, the second stage of a
    BatchNorm-backward sum got thousands of times the FLOPs Nsight Compute counted). A later stage
    is recognised by reading the output of a reduction that has exactly its own origins; it counts
    1 FLOP per element it reads (its ranges times its reduction ranges), as docs/costs.md counts
    reductions."""
    try:
        from torch._inductor import ir

        node = sub.node
        own = set(node.origins)
        if not own:
            return None
        later = False
        for dep in sub.read_writes.reads:
            buf = graph.get_buffer(dep.name)
            if (isinstance(getattr(buf, "data", None), ir.Reduction)
                    and set(getattr(buf, "origins", ())) == own):
                later = True
                break
        return ir_elements(node) if later else None
    except Exception:  # an IR shape we do not know: count the origins as before
        return None


def is_reduction_ir(sub: Any) -> bool:
    """Whether a scheduler node computes a reduction (over its input, or over partial results)."""
    try:
        from torch._inductor import ir

        return isinstance(getattr(sub.node, "data", None), ir.Reduction)
    except Exception:
        return False


def ir_elements(node: Any) -> costs.Expr | None:
    """Elements an IR node computes: its ranges times its reduction ranges (None: unknown)."""
    try:
        ranges = list(node.get_size())
        get_rsize = getattr(getattr(node, "data", None), "get_reduction_size", None)
        ranges += list(get_rsize()) if get_rsize is not None else []
        return costs.to_expr(math.prod((costs.to_expr(r) for r in ranges), start=1))
    except Exception:
        return None
