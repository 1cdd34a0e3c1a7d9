"""Which events of a trace are kernels, and of what kind: the first stages of
:func:`inductor_perf.summary.core.summarize`.

Complete events are parsed into :class:`ParsedEvent` nodes, each thread's host events are nested by time
(the forest that idle attribution walks), and the kernels are chosen: device events when the trace
has any, else the CPU kernels of compiled graphs, else the outermost eager aten ops. Pure and
torch-free.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from ..model import events as evs
from ..model.kernel_kinds import (KIND_COLLECTIVE, KIND_EXTERN_MATMUL, KIND_GENERATED, KIND_MEMCPY, KIND_MEMSET,
                                  KIND_OTHER, KINDS, kernel_kind)

# --- Which events are kernels ---------------------------------------------------------------------
# The profiler's own whole-window span; counting it would stretch the window to profiler start-up.
_IGNORED_CATS = frozenset({"trace"})

GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"

DEF_GPU = "gpu-kernels"
DEF_CPU_COMPILED = "cpu-compiled-kernels"
DEF_CPU_EAGER = "cpu-eager-aten"
DEF_NONE = "none"
KERNEL_DEFINITIONS = {
    DEF_GPU: "GPU device events (cat kernel / gpu_memcpy / gpu_memset)",
    DEF_CPU_COMPILED: ("CPU kernels launched by compiled graphs: events costed from compile-time tags, "
                       "graph_<N>_* events, and outermost aten ops inside '## Call CompiledFxGraph' calls; "
                       "plus the eager aten ops run between compiled pieces (graph breaks)"),
    DEF_CPU_EAGER: ("outermost aten:: ops on each CPU thread, each with the costs of the ops inside it (no "
                    "compiled-graph kernels in this trace)"),
    DEF_NONE: "no kernel events found",
}

_GRAPH_KERNEL_NAME = re.compile(r"^graph_\d+_")


NOT_COMPUTE = frozenset({KIND_MEMCPY, KIND_MEMSET, KIND_COLLECTIVE})
"""Kinds whose FLOP count (0) does not make a trace's FLOP figures known."""
COPY_CATS = frozenset({"gpu_memcpy", "gpu_memset", "memcpy", "memset"})
"""Categories of device copies and fills: their 0 FLOPs neither, whatever op launched them (a memset
launched by ``aten::mm`` is of kind matmul in the time split)."""


def counts_flops(flop: float | int | None, kind: str, cat: str | None) -> bool:
    """Whether a kernel's FLOP count ``flop`` makes the FLOP figures of what it is summed into known:
    a compute kernel's count, not a copy's, a fill's or a collective's 0 (unknown is not zero)."""
    return (flop is not None and kind not in NOT_COMPUTE
            and (flop > 0 or cat is None or cat.lower() not in COPY_CATS))


# --- Parsing --------------------------------------------------------------------------------------
class ParsedEvent:
    __slots__ = ("name", "cat", "pid", "tid", "ts", "dur", "end", "args", "parent", "children",
                 "is_kernel")

    def __init__(self, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float,
                 args: dict[str, Any]) -> None:
        self.name = name
        self.cat = cat
        self.pid = pid
        self.tid = tid
        self.ts = ts
        self.dur = dur
        self.end = ts + dur
        self.args = args
        self.parent: ParsedEvent | None = None
        self.children: list[ParsedEvent] = []
        self.is_kernel = False


def _num(value: Any) -> float | int | None:
    """A finite number from a trace value, or None (bools, strings that are not numbers, NaN...).

    :func:`inductor_perf.model.events.number` plus two things it does not do: ints stay ints, so FLOP sums
    stay exact and print as integers, and numeric strings count, as a trace may carry them.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return evs.number(value)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)


def _parse(events: Iterable[Any], skipped: dict[str, int]) -> list[ParsedEvent]:
    out: list[ParsedEvent] = []
    for raw in events:
        if not isinstance(raw, dict):
            skipped["not an object"] += 1
            continue
        if raw.get("ph") != "X":
            continue  # metadata, flows, counters, instants: not durations, not errors
        t = evs.event_time(raw.get("ts"), raw.get("dur"))
        if t is None:  # every command's rule: a complete event of any category, counted
            skipped[evs.BAD_TIME] += 1
            continue
        ts, dur = t
        cat = raw.get("cat")
        cat = cat if isinstance(cat, str) else ""
        if cat.lower() in _IGNORED_CATS:
            continue
        if dur == 0:
            # An instant carries no time; keeping it would only add zero-width kernels.
            skipped["zero dur"] += 1
            continue
        args = raw.get("args")
        name = raw.get("name")
        out.append(ParsedEvent(name if isinstance(name, str) else str(name), cat, _hashable(raw.get("pid")),
                       _hashable(raw.get("tid")), ts, dur,
                       args if isinstance(args, dict) else {}))
    return out


def _build_forest(events: list[ParsedEvent]) -> dict[tuple[Any, Any], list[ParsedEvent]]:
    """Nest each thread's events by time; returns the roots per (pid, tid).

    Children of one node never overlap in the attribution below; an event that only partly overlaps
    an open one (a malformed trace) is attached to the nearest ancestor that contains it.
    """
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
    for i, e in enumerate(events):
        by_thread[(e.pid, e.tid)].append((e.ts, -e.dur, i))
    order, parent = evs.nest_threads(by_thread, slack=1e-6)
    roots: dict[tuple[Any, Any], list[ParsedEvent]] = {}
    for key, items in order.items():
        top: list[ParsedEvent] = []
        for _, _, i in items:
            e = events[i]
            p = parent.get(i)
            if p is None:
                top.append(e)
            else:
                e.parent = events[p]
                events[p].children.append(e)
        roots[key] = top
    return roots


def _walk(nodes: list[ParsedEvent]) -> Iterable[ParsedEvent]:
    todo = list(reversed(nodes))
    while todo:
        n = todo.pop()
        yield n
        todo.extend(reversed(n.children))


def _tagged(args: Mapping[str, Any]) -> bool:
    """Whether an event's cost came from a compiled graph's tags (``kernel_kind``, or a cost not
    computed from recorded shapes): a compiled kernel. A cost from shapes (``augment`` of an eager
    trace) says nothing of how the op ran."""
    return evs.KERNEL_KIND in args or (evs.KERNEL_FLOP in args and args.get(evs.COST_SOURCE) != "shapes")


def _select_cpu_kernels(roots: dict[tuple[Any, Any], list[ParsedEvent]]) -> tuple[list[ParsedEvent], str]:
    """The CPU kernels of compiled graphs (and the eager ops between their pieces), else the
    outermost aten ops of each thread with the costs of the ops inside them (:func:`_with_inner_costs`):
    one rule whether or not the trace carries costs."""
    compiled: list[ParsedEvent] = []
    # (node, inside a compiled-graph call, below an aten op); iterative: real traces nest deeply.
    todo: list[tuple[ParsedEvent, bool, bool]] = [(r, False, False) for top in roots.values() for r in top]
    while todo:
        node, in_call, under_op = todo.pop()
        is_op = node.name.startswith("aten::") or node.name.startswith("aoti_torch_")
        if (_tagged(node.args) or _GRAPH_KERNEL_NAME.match(node.name) or (in_call and is_op and not under_op)):
            compiled.append(node)
            continue  # only the outermost kernel counts; its children are its own work
        in_call = in_call or node.name.startswith(GRAPH_CALL_PREFIX)
        todo.extend((c, in_call, under_op or is_op) for c in node.children)
    if compiled:
        return compiled + _eager_between_pieces(roots, compiled), DEF_CPU_COMPILED
    eager: list[ParsedEvent] = []
    for top in roots.values():
        for n in _walk(top):
            if n.name.startswith("aten::"):
                p = n.parent
                while p is not None and not p.name.startswith("aten::"):
                    p = p.parent
                if p is None:
                    eager.append(_with_inner_costs(n))
    return eager, (DEF_CPU_EAGER if eager else DEF_NONE)


_COST_SUMS = (evs.KERNEL_FLOP, evs.KERNEL_MATMUL_FLOP, evs.KERNEL_BYTES_READ, evs.KERNEL_BYTES_WRITTEN)


def _with_inner_costs(op: ParsedEvent) -> ParsedEvent:
    """An outermost eager op that carries no cost, given the summed costs of the outermost costed ops
    inside it (``augment`` costs the op that does the work, ``aten::addmm`` inside ``aten::linear``):
    FLOPs and bytes added, the dtype of the one with the most (matmul, then all) FLOPs. ``op``
    unchanged when it carries a cost or none is found inside it."""
    if evs.KERNEL_FLOP in op.args or evs.KERNEL_NUM_GB in op.args:
        return op
    inner: list[Mapping[str, Any]] = []
    todo = list(op.children)
    while todo:
        n = todo.pop()
        if evs.KERNEL_FLOP in n.args or evs.KERNEL_NUM_GB in n.args:
            inner.append(n.args)
        else:
            todo.extend(n.children)
    if not inner:
        return op
    merged: dict[str, Any] = dict(op.args)
    for key in _COST_SUMS:
        values = [v for a in inner if (v := _num(a.get(key))) is not None]
        if values:
            merged[key] = sum(values)
    gbs = [v for a in inner if (v := _num(a.get(evs.KERNEL_NUM_GB))) is not None]
    if gbs:
        merged[evs.KERNEL_NUM_GB] = sum(gbs)
    dtypes = [w for a in inner if (w := dtype_weight(a)) is not None]
    if dtypes:
        merged[evs.KERNEL_DTYPE] = max(dtypes, key=lambda w: (w[1], w[2]))[0]
    for key in (evs.COST_SOURCE, evs.COST_BOUND):
        found = next((a[key] for a in inner if key in a), None)
        if found is not None:
            merged[key] = found
    op.args = merged
    return op


COMPILED_REGION_PREFIX = "Torch-Compiled Region"
_AUTOGRAD_NODE = "autograd::engine::evaluate_function: "
_COMPILED_BACKWARD = _AUTOGRAD_NODE + "CompiledFunctionBackward"
_NOT_MODEL_WORK = (_AUTOGRAD_NODE + "torch::autograd::AccumulateGrad",)


# Ranges of the compiled graph's own runtime (the call, AOTAutograd's wrapper around it, which
# also regenerates output views): their ops are not eager work between pieces.
_COMPILED_RUNTIME = (GRAPH_CALL_PREFIX, "CompiledFunction", "AOTDispatcher")


def _outermost_ops(node: ParsedEvent) -> Iterator[ParsedEvent]:
    """The outermost aten ops below ``node`` outside the compiled graphs' own runtime ranges."""
    todo = list(node.children)
    while todo:
        n = todo.pop()
        if n.name.startswith(_COMPILED_RUNTIME):
            continue
        if n.name.startswith("aten::"):
            yield n
        else:
            todo.extend(n.children)


def _below_steps(top: list[ParsedEvent]) -> list[ParsedEvent]:
    """A thread's top-level events with the ``ProfilerStep#N`` ranges opened (in time order): a
    step range (torch.profiler's schedule, our env-var capture) wraps a whole step and says nothing
    of what runs in it."""
    out: list[ParsedEvent] = []
    for n in top:
        if n.name.startswith("ProfilerStep#"):
            out.extend(_below_steps(n.children))
        else:
            out.append(n)
    return out


def _eager_between_pieces(roots: dict[tuple[Any, Any], list[ParsedEvent]], compiled: list[ParsedEvent]) -> list[ParsedEvent]:
    """Eager work that runs between the compiled pieces of a graph-broken model, counted as kernels
    of the module it sits in: the outermost aten ops inside a ``Torch-Compiled Region`` range but in
    no compiled-graph call (forward), and those of the eager autograd nodes run between two
    compiled backward graphs of one backward pass (their backward; not the loss's backward before
    the first one, nor gradient accumulation). Each gets, as ``module_path``, the common path of
    the compiled kernels just before and after it on its thread (a break inside ``gate.forward``
    lies between kernels of ``gate.*``)."""
    found: list[ParsedEvent] = []
    for top in roots.values():
        top = _below_steps(top)
        for n in top:
            if n.name.startswith(COMPILED_REGION_PREFIX):
                found.extend(_outermost_ops(n))
        for run in _backward_passes(top):
            compiled_at = [i for i, n in enumerate(run) if n.name == _COMPILED_BACKWARD]
            for n in run[compiled_at[0] + 1:compiled_at[-1]] if compiled_at else ():
                if n.name != _COMPILED_BACKWARD and n.name not in _NOT_MODEL_WORK:
                    found.extend(_outermost_ops(n))
    if not found:
        return found
    by_thread: dict[tuple[Any, Any], list[ParsedEvent]] = {}
    for k in compiled:
        by_thread.setdefault((k.pid, k.tid), []).append(k)
    starts: dict[tuple[Any, Any], list[float]] = {}
    for key, ks in by_thread.items():
        ks.sort(key=lambda e: e.ts)
        starts[key] = [k.ts for k in ks]
    for e in found:
        ks = by_thread.get((e.pid, e.tid), [])
        i = bisect.bisect_left(starts.get((e.pid, e.tid), []), e.ts)
        near = [k.args.get(evs.MODULE_PATH) for k in ks[max(i - 1, 0):i + 1]]
        e.args = {**e.args, evs.MODULE_PATH: _common_module([m for m in near if isinstance(m, str)])}
    return found


def _backward_passes(top: list[ParsedEvent]) -> Iterator[list[ParsedEvent]]:
    """Runs of consecutive autograd-node events on a thread: one backward pass each (a step's
    forward, loss or optimizer events separate two passes)."""
    run: list[ParsedEvent] = []
    for n in top:
        if n.name.startswith(_AUTOGRAD_NODE):
            run.append(n)
        elif run:
            yield run
            run = []
    if run:
        yield run


def _common_module(paths: list[str]) -> str | None:
    """The longest dotted prefix of ``paths`` ("" when they share none; None without paths).

    >>> _common_module(["gate.fc", "gate"]), _common_module(["a.b", "c"]), _common_module([])
    ('gate', '', None)
    """
    if not paths:
        return None
    parts = [p.split(".") if p else [] for p in paths]
    out = []
    for names in zip(*parts):
        if len(set(names)) != 1:
            break
        out.append(names[0])
    return ".".join(out)


def headline_dtype(kernels: Iterable[Mapping[str, Any]]) -> str:
    """The dtype whose roof a trace's overall "% of peak" uses: of the ``kernel_dtype`` args the
    augmentation wrote, the one carrying the most matmul FLOPs, then the most FLOPs; float32 when
    no event says (a raw trace).

    >>> headline_dtype([{"kernel_dtype": "bfloat16", "kernel_matmul_flop": 8, "kernel_flop": 8},
    ...                 {"kernel_dtype": "float32", "kernel_matmul_flop": 0, "kernel_flop": 99}])
    'bfloat16'
    """
    totals: dict[str, list[float]] = {}
    for args in kernels:
        add_dtype_weight(totals, args)
    return dtype_of_weights(totals)


def add_dtype_weight(totals: dict[str, list[float]], args: Mapping[str, Any]) -> None:
    """Count one kernel's args in :func:`headline_dtype`'s ``totals`` (for a caller that streams)."""
    add_weight(totals, dtype_weight(args))


def dtype_weight(args: Mapping[str, Any]) -> tuple[str, float | int, float | int] | None:
    """What :func:`add_dtype_weight` reads of a kernel's args: (dtype, matmul FLOPs, FLOPs), or None
    without a dtype."""
    name = args.get(evs.KERNEL_DTYPE)
    if not isinstance(name, str):
        return None
    return name, _num(args.get(evs.KERNEL_MATMUL_FLOP)) or 0, _num(args.get(evs.KERNEL_FLOP)) or 0


def add_weight(totals: dict[str, list[float]], weight: tuple[str, float | int, float | int] | None) -> None:
    """Count one kernel's :func:`dtype_weight` in ``totals``."""
    if weight is None:
        return
    acc = totals.setdefault(weight[0], [0.0, 0.0])
    acc[0] += weight[1]
    acc[1] += weight[2]


def dtype_of_weights(totals: dict[str, list[float]]) -> str:
    """:func:`headline_dtype` of the ``totals`` :func:`add_dtype_weight` summed."""
    return max(totals, key=lambda k: tuple(totals[k])) if totals else "float32"


@dataclass(frozen=True)
class TraceKernels:
    """The parsed events of one trace, its host threads nested by time, and the kernels among them."""

    events: list[ParsedEvent]
    host_events: list[ParsedEvent]
    """Every event not on a device timeline (device copies of annotations, ``gpu_*``, included)."""
    roots: dict[tuple[Any, Any], list[ParsedEvent]]
    """Top-level host events per (pid, tid); see :func:`_build_forest`."""
    kernels: list[ParsedEvent]
    definition: str
    """Which rule chose ``kernels``: a key of :data:`KERNEL_DEFINITIONS`."""


def select_kernels(events: list[ParsedEvent]) -> TraceKernels:
    """Nest the host events per thread and choose the kernels (marking them ``is_kernel``):
    device events when there are any, else the CPU kernels of compiled graphs, else eager aten ops."""
    device_events = [e for e in events if e.cat.lower() in evs.DEVICE_CATS]
    host_events = [e for e in events if not evs.is_device_side(e.cat)]
    roots = _build_forest(host_events)
    if device_events:
        kernels, definition = device_events, DEF_GPU
    else:
        kernels, definition = _select_cpu_kernels(roots)
    for k in kernels:
        k.is_kernel = True
    return TraceKernels(events, host_events, roots, kernels, definition)
