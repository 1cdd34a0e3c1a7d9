"""The trace-event vocabulary, in one place: the argument keys we add, the event categories, and
the small readers every stage uses (number coercion, strict-JSON values, complete-event views).

Arg keys follow upstream's ``kernel_flop`` / ``kernel_num_gb`` on purpose, so tools that already
read those keep working. Pure and torch-free.
"""

from __future__ import annotations

import itertools
import math
import operator
from array import array
from typing import Any, Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

_Thread = TypeVar("_Thread", bound=Hashable)

# --- Args added to every kernel event by augmentation -------------------------------------------
KERNEL_FLOP = "kernel_flop"                      # int: total FLOPs of this call
KERNEL_MATMUL_FLOP = "kernel_matmul_flop"        # int: the matmul / conv / attention part
KERNEL_RECOMPUTE_FLOP = "kernel_recompute_flop"  # int: of the matmul part, forward work the backward recomputes
KERNEL_NUM_GB = "kernel_num_gb"                  # float: (bytes read + written) / 1e9
KERNEL_BYTES_READ = "kernel_bytes_read"          # int
KERNEL_BYTES_WRITTEN = "kernel_bytes_written"    # int
ACHIEVED_TFLOPS = "achieved_tflops"              # float: kernel_flop / dur
ACHIEVED_GBPS = "achieved_gbps"                  # float: bytes / dur
ACHIEVED_FLOPS_PCT = "achieved_flops_pct"        # float: % of the compute roof (when known)
ACHIEVED_BANDWIDTH_PCT = "achieved_bandwidth_pct"  # float: % of the memory roof (when known)
ROOFLINE_BOUND = "roofline_bound"                # "compute" | "memory" | "latency" | "unknown"
SOURCE = "source"                                # "file.py:123" of the innermost user frame
MODULE_PATH = "module_path"                      # "encoder.layers.0.attn"
NODE_NAMES = "node_names"                        # "mm_1, relu_2": FX nodes the kernel computes
STACK_TRACE = "stack_trace"                      # the user's stack, as FX recorded it
# Further keys, for joins and diffs.
KERNEL_KIND = "kernel_kind"                      # "generated" | "extern"
GRAPH_ID = "graph_id"                            # Inductor graph id the kernel belongs to
IS_BACKWARD = "is_backward"                      # bool
COST_SOURCE = "cost_source"                      # "tag" (compile-time) | "shapes" (recorded shapes) | "triton" (launch args)
EAGER_OPS = "eager_ops"                          # "aten::add, aten::native_layer_norm": eager ops fused into the kernel
KERNEL_DTYPE = "kernel_dtype"                    # "bfloat16": the dtype whose roof the achieved % uses
# Offline joins of plain profiler traces (costs.from_shapes): which op launched a device event, and why an
# event got no cost.
LAUNCH_OP = "launch_op"                          # "aten::mm": the CPU op that launched this device event
NOT_COSTED = "not_costed"                        # why no cost: one of NOT_COSTED_REASONS
COST_BOUND = "kernel_cost_bound"                 # "lower": FLOPs and bytes are a lower bound (docs/costs.md)
# Collectives (nccl-tests' definitions, docs/costs.md) and the roof achieved_bandwidth_pct is against.
COMM_OP = "comm_op"                              # "all_reduce", "all_to_all", "send_recv", ...
COMM_BYTES = "comm_bytes"                        # int: the collective's message size S in bytes
GROUP_SIZE = "group_size"                        # int: ranks taking part
ALGBW_GBPS = "algbw_gbps"                        # float: S / dur
BUSBW_GBPS = "busbw_gbps"                        # float: algbw times the collective's bus factor
MEMORY_ROOF = "memory_roof"                      # "hbm" | "host_link" | "interconnect"

NOT_COSTED_REASONS = (
    "no_shapes",      # the launching op recorded no Input Dims (record_shapes=False)
    "unknown_op",     # an op we have no cost rule for (nor torch's shape rules)
    "bad_shapes",     # the op's shape rule refused the recorded inputs
    "unknown_dtype",  # an Input type we cannot size
    "no_launch_op",   # no CPU op found for the kernel (lost correlation)
    "graph_replay",   # replayed by cudaGraphLaunch: the kernels of a captured CUDA graph have no op records
)

GRAPH_REPLAY = "graph_replay"
"""The reason of a kernel of a CUDA graph replay (``cudaGraphLaunch``): no op recorded the shapes of
the kernels captured in the graph, so it is never costed from the op around the launch
(``CompiledFunction``)."""

LOWER_BOUND = "lower"
"""The :data:`COST_BOUND` value of a cost that is a lower bound: the op's record left out values
that change its cost, and the least cost over every value torch accepts was taken."""

ADDED_ARG_KEYS = (
    KERNEL_FLOP, KERNEL_MATMUL_FLOP, KERNEL_RECOMPUTE_FLOP, KERNEL_NUM_GB, KERNEL_BYTES_READ, KERNEL_BYTES_WRITTEN,
    ACHIEVED_TFLOPS, ACHIEVED_GBPS, ACHIEVED_FLOPS_PCT, ACHIEVED_BANDWIDTH_PCT, ROOFLINE_BOUND,
    SOURCE, MODULE_PATH, NODE_NAMES, STACK_TRACE, KERNEL_KIND, GRAPH_ID, IS_BACKWARD, COST_SOURCE, EAGER_OPS,
    KERNEL_DTYPE, LAUNCH_OP, NOT_COSTED, COST_BOUND, COMM_OP, COMM_BYTES, GROUP_SIZE, ALGBW_GBPS, BUSBW_GBPS,
    MEMORY_ROOF,
)

COST_MARKS = (KERNEL_FLOP, COST_SOURCE, LAUNCH_OP)
"""The args that make a trace costed (:func:`is_costed`): augmentation writes them, and a trace of our
own compiled run carries them from its tags. A costed trace's costs are its own: ``summary`` and
``diff`` read them instead of costing the trace from its recorded shapes."""


def has_cost_mark(args: Any) -> bool:
    """Whether an event's ``args`` carry a cost mark (:data:`COST_MARKS`). The per-event loop of the
    streaming summary tests it inline (``summary.stream.loop.read_batch``, which unpacks the marks).

    >>> has_cost_mark({"launch_op": "aten::mm"}), has_cost_mark({"kernel_num_gb": 1.0}), has_cost_mark(None)
    (True, False, False)
    """
    return isinstance(args, dict) and any(k in args for k in COST_MARKS)


def is_costed(trace: Mapping[str, Any]) -> bool:
    """Whether any event of ``trace`` carries a cost mark (:func:`has_cost_mark`): augmented, or our
    own compiled run's.

    >>> is_costed({"traceEvents": [{"ph": "X", "args": {"kernel_flop": 2}}]}), is_costed({"traceEvents": []})
    (True, False)
    """
    events = trace.get("traceEvents")
    return isinstance(events, list) and any(isinstance(ev, dict) and has_cost_mark(ev.get("args")) for ev in events)


# Event categories, lower-cased. Kineto writes "cpu_op"/"kernel"/"cuda_runtime"; pre-2.0 traces
# wrote "Operator"/"Kernel"/"Runtime".
CPU_OP_CATS = frozenset({"cpu_op", "operator"})
CPU_SCOPE_CATS = frozenset({"cpu_op", "operator", "user_annotation"})
KERNEL_CATS = frozenset({"kernel"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"})
"""Host calls into the GPU runtime or driver (``cudaLaunchKernel``, ``cuLaunchKernel``; ROCm's HIP
calls, which Kineto files as ``cuda_runtime`` or ``hip_runtime``; pre-2.0 Kineto's ``Runtime``): each
launch carries the ``correlation`` id of the device work it starts. The cost join follows it to the op
that launched a kernel, the summary to the thread that launched it, a diff to its unit. Match with
:func:`is_runtime`."""
FLOW_CATS = frozenset({"ac2g"})
# Device-side categories that can carry a kernel's cost (older Kineto capitalized them).
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})


def is_runtime(cat: Any) -> bool:
    """Whether events of category ``cat`` are runtime calls (:data:`RUNTIME_CATS`, any case).

    >>> [is_runtime(c) for c in ("cuda_runtime", "cuda_driver", "hip_runtime", "Runtime", "cpu_op", None)]
    [True, True, True, True, False, False]
    """
    return isinstance(cat, str) and cat.lower() in RUNTIME_CATS


def replays_cuda_graph(cat: Any, name: Any) -> bool:
    """Whether an event of category ``cat`` named ``name`` is a runtime call that replays a CUDA graph
    (``cudaGraphLaunch``): the kernels it starts were launched when the graph was captured, so the
    trace shows no launch of their own (the summary says so). Calls filed as ``hip_runtime`` are left
    out. The streaming pass tests ``"GraphLaunch" in name`` before calling it.

    >>> replays_cuda_graph("cuda_runtime", "cudaGraphLaunch"), replays_cuda_graph("hip_runtime", "hipGraphLaunch")
    (True, False)
    """
    return (is_runtime(cat) and isinstance(name, str) and "GraphLaunch" in name
            and cat.lower() != "hip_runtime")


def is_device_side(cat: Any) -> bool:
    """Events on a GPU timeline: kernels and copies, and the GPU-stream copies Kineto makes of
    user annotations (``gpu_user_annotation``), which must not count as graph calls."""
    return isinstance(cat, str) and (cat.lower() in DEVICE_CATS or cat.lower().startswith("gpu_"))


# --- Row labels: the keys of table rows that name no module, line, op or event of the user's -------
# Summary (module and line tables, idle attribution, collectives' compute time).
ROOT_MODULE = "(root module)"
"""Work in the top-level forward itself: ``module_path`` "" (the summary's module table, a diff's
module rows, the other modules a kernel's nodes belong to)."""
NO_MODULE = "(no module)"
"""Kernels with no ``module_path`` arg: their module is unknown (:func:`module_row`)."""
NO_SOURCE = "(no source)"
"""Kernels with no (or an empty) ``source`` arg: their line is unknown (:func:`line_row`)."""
NO_HOST_EVENT = "(no host event)"
"""Idle time during which the launching thread ran no event (the idle table's host activity)."""
LAUNCHER_UNKNOWN = "(launching thread unknown)"
"""Idle time before a kernel whose launching thread the trace does not say (the idle table)."""
# Comparison (eager vs compiled, trace vs trace).
OPTIMIZER_PHASE = "optimizer"
"""The phase of the work inside torch.optim's own ranges (``Optimizer.step#SGD.step``,
``Optimizer.zero_grad#...``: every optimizer's ``step`` and ``zero_grad`` record one)."""
OTHER_PHASE = "other"
"""The phase of a device event launched from no thread of the step, or whose launch the trace lacks
(only kernels have it: ``by="kernel"``)."""
PHASE_ORDER = ("forward", "backward", OPTIMIZER_PHASE, OTHER_PHASE)
"""A comparison's phases in the order of a step: its rows, tables and page list them so."""
UNATTRIBUTED = "(unattributed)"
"""The row of step time that no op or kernel covers (Python between ops, hooks, the profiler)."""
OUTSIDE_MODEL = "(outside model)"
"""Ops of a step outside the model's forward and backward (the loss, the optimizer, copies)."""
RUNTIME_OVERHEAD = "(runtime overhead)"
"""The compiled graphs' own runtime around their kernels (guards, the wrappers)."""
GRAD_ACCUM = "(grad accumulation)"
"""The autograd engine's accumulation of gradients into ``.grad``."""
NO_KEY = "(unknown)"
"""A unit whose module is not known (a compiled kernel without tags, a kernel launched from no step)."""
NO_SOURCE_INFO = "(no source info)"
"""A diff's ``by="line"`` row of units with no source line (eager traces carry none)."""
SPECIAL_KEYS = (OUTSIDE_MODEL, RUNTIME_OVERHEAD, GRAD_ACCUM, NO_KEY)
"""The comparison's module keys that are no module of the user's code (sorted after the others)."""


def module_row(module_path: Any) -> str:
    """The module-table row of a kernel whose ``module_path`` arg is ``module_path``.

    >>> module_row("encoder.fc"), module_row(""), module_row(None)
    ('encoder.fc', '(root module)', '(no module)')
    """
    return (module_path or ROOT_MODULE) if isinstance(module_path, str) else NO_MODULE


def line_row(source: Any) -> str:
    """The line-table row of a kernel whose ``source`` arg is ``source``.

    >>> line_row("model.py:12"), line_row(""), line_row(None)
    ('model.py:12', '(no source)', '(no source)')
    """
    return source if isinstance(source, str) and source else NO_SOURCE


def strict_json(v: Any) -> Any:
    """A copy of ``v`` with non-finite floats replaced by None, which strict JSON can write."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: strict_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [strict_json(x) for x in v]
    return v


# --- Event views ---------------------------------------------------------------------------------
def number(v: Any) -> float | None:
    """``v`` as a finite float, or None for anything else (bools, strings, NaN, missing)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


# --- Event times: one rule for every reader -------------------------------------------------------
TS_MAX_US = 7.3e15
"""The latest start read: about the year 2200 (7.26e15) in µs since 1970. Kineto writes µs since
the epoch (or, in older releases, since boot: smaller still); a start beyond this is no clock of ours
in µs (nanoseconds, a corrupt value) and would stretch the window over centuries."""
DUR_MAX_US = 7 * 86_400e6
"""The longest duration read: 7 days in µs. No profiler window is that long (Kineto's buffers hold
minutes of a busy GPU); a longer duration is a corrupt value, and one such event would make every
share of the window meaningless (``dur: 1e300`` printed a window of 300 digits)."""

BAD_TIME = "bad ts/dur"
"""The reason an event is skipped for its times (a summary's ``skipped`` key; :func:`bad_time_note`)."""


def event_time(ts: Any, dur: Any) -> tuple[float, float] | None:
    """``(ts, dur)`` of a complete event as floats, or None when either is not a JSON number (an int
    or float: not a bool, not a numeric string, since Kineto writes numbers), not finite, negative,
    or past its bound (:data:`TS_MAX_US`, :data:`DUR_MAX_US`). Every command skips such an event and
    counts it (:data:`BAD_TIME`). The reference: hot loops test :func:`plain_time` inline first.

    >>> event_time(5, 2.5), event_time("10", 1.0), event_time(0.0, -1.0), event_time(0.0, 1e300)
    ((5.0, 2.5), None, None, None)
    """
    if type(ts) is float and type(dur) is float:  # what Kineto writes: no call for the common case
        return (ts, dur) if 0.0 <= ts <= TS_MAX_US and 0.0 <= dur <= DUR_MAX_US else None
    t = _time_value(ts, TS_MAX_US)
    d = _time_value(dur, DUR_MAX_US)
    return None if t is None or d is None else (t, d)


def _time_value(v: Any, hi: float) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int) and not 0 <= v <= hi:  # before float(): a huge int would overflow
        return None
    f = float(v)
    return f if 0.0 <= f <= hi else None  # NaN compares false


def plain_time(ts: Any, dur: Any) -> bool:
    """The fast form of :func:`event_time` that the per-event loops write inline
    (``summary.stream.loop.read_batch``, ``costs.launch.LaunchIndex.index``, and ``event_time``'s first test):
    true only when ``event_time(ts, dur) == (ts, dur)`` (floats in bounds); anything else goes to the
    reference (``tests/unit/model/test_event_time.py`` checks the two agree)."""
    return type(ts) is float and type(dur) is float and 0.0 <= ts <= TS_MAX_US and 0.0 <= dur <= DUR_MAX_US


def bad_time_note(n: int) -> str:
    """The note every command shows for ``n`` events skipped by :func:`event_time`."""
    return (f"{n:,} events skipped: ts/dur not a finite non-negative number within bounds (numbers, not "
            f"strings; ts up to {TS_MAX_US:.2g} µs, about the year 2200; dur up to 7 days)")


def category(ev: dict) -> str:
    """The event's ``cat``, lower-cased ('' when missing or not a string)."""
    cat = ev.get("cat")
    return cat.lower() if isinstance(cat, str) else ""


def event_args(ev: dict) -> dict:
    """The event's ``args`` dict, or an empty dict when missing or malformed."""
    a = ev.get("args")
    return a if isinstance(a, dict) else {}


def complete_events(trace: dict, cats: frozenset[str] | None = None,
                    skipped: dict[str, int] | None = None) -> Iterator[tuple[int, dict, float, float]]:
    """``(index, event, ts, dur)`` of every complete (``ph == "X"``) event whose times pass
    :func:`event_time`. ``cats`` filters by lower-cased category. ``skipped``: the complete events
    of any category that fail it are counted there under :data:`BAD_TIME`.
    """
    for i, ev in enumerate(trace["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        t = event_time(ev.get("ts"), ev.get("dur"))
        if t is None:
            if skipped is not None:
                skipped[BAD_TIME] = skipped.get(BAD_TIME, 0) + 1
            continue
        if cats is not None and category(ev) not in cats:
            continue
        yield i, ev, t[0], t[1]


def device_kernels(trace: dict) -> Iterator[tuple[int, dict, float, float]]:
    """Complete events of device kernels (``cat == "kernel"``)."""
    return complete_events(trace, KERNEL_CATS)


def cpu_ops(trace: dict) -> Iterator[tuple[int, dict, float, float]]:
    """Complete events of CPU operators (``cat`` ``cpu_op`` or the older ``Operator``)."""
    return complete_events(trace, CPU_OP_CATS)


def nest_threads(threads: Mapping[_Thread, Iterable[tuple[float, float, int]]],
                 encloses: Container[int] | None = None, slack: float | None = None
                 ) -> tuple[dict[_Thread, list[tuple[float, float, int]]], dict[int, int]]:
    """Nest each thread's complete events by time: which event encloses which.

    ``threads`` maps a thread (``(pid, tid)``) to its events as ``(ts, -dur, index)``: ``-dur`` so
    that, of two events that start together, the longer (the enclosing one) sorts first, and
    ``index`` (the event's position in the trace) breaks the remaining ties. Returns

    - ``order``: each thread's tuples sorted that way (the order a walk of the nesting visits them);
    - ``parent``: event index -> index of the innermost event still open at its start (an event
      is open from ``ts`` until, exclusive, ``ts + dur``), among ``encloses`` (every event when
      None: a join passes its CPU scopes, since a runtime call encloses nothing). Top-level
      events have no entry.

    ``slack`` None: an event that starts inside an open one is its child even when it ends after
    it (malformed traces; a join would rather find a launching op than none). A number: the child
    must also end by the open event's end + ``slack``; an event that does not is compared with the
    next enclosing one instead. Pure: the inputs are not modified.

    >>> order, parent = nest_threads({(1, 1): [(0.0, -10.0, 0), (2.0, -3.0, 1), (3.0, -1.0, 2), (12.0, -1.0, 3)]})
    >>> parent
    {1: 0, 2: 1}
    >>> nest_threads({(1, 1): [(0.0, -4.0, 0), (3.0, -2.0, 1)]}, slack=0.0)[1]
    {}
    """
    order: dict[_Thread, list[tuple[float, float, int]]] = {}
    parent: dict[int, int] = {}
    for key, items in threads.items():
        ordered = order[key] = sorted(items)
        stack: list[tuple[float, int]] = []  # (end, index) of the open events, innermost last
        for ts, negdur, i in ordered:
            if slack is None:
                while stack and stack[-1][0] <= ts:
                    stack.pop()
            else:
                while stack and not (ts < stack[-1][0] and ts - negdur <= stack[-1][0] + slack):
                    stack.pop()
            if stack:
                parent[i] = stack[-1][1]
            if encloses is None or i in encloses:
                stack.append((ts - negdur, i))  # the end, exactly ts + dur
    return order, parent


Columns = tuple[array, array, array]
"""One thread's events as flat arrays ``(ts, -dur, index)``, in the order they were seen (index
increasing): 24 bytes an event where a tuple costs ~150."""


def new_columns() -> Columns:
    return array("d"), array("d"), array("q")


def order_by_start(ts: Sequence[float], tie_key: Callable[[int], Any]) -> Sequence[int]:
    """Positions sorted by start, then runs of equal starts by ``tie_key(position)`` (for
    :func:`nest_threads`' order, ``(-dur, position)``: the enclosing event first). No tuple per
    event: already-sorted starts (most threads) skip the sort, and only the ties are sorted again.
    No int object per event either (a ``range``, else an array: 8 bytes a position, where a list of
    ints took 40)."""
    n = len(ts)
    order: Any
    if all(map(operator.le, ts, itertools.islice(ts, 1, None))):
        order = range(n)
        starts: Sequence[float] = ts
    else:
        order = array("q", sorted(range(n), key=ts.__getitem__))  # stable: equal starts keep their positions
        starts = [ts[k] for k in order]
    ties = list(itertools.compress(range(n - 1), map(operator.eq, starts, itertools.islice(starts, 1, None))))
    if ties and type(order) is range:
        order = array("q", order)
    j = 0
    while j < len(ties):
        lo = k = ties[j]
        while j < len(ties) and ties[j] == k:
            j += 1
            k += 1
        order[lo:k + 1] = array("q", sorted(order[lo:k + 1], key=tie_key))
    return order


def nest_columns(threads: Mapping[_Thread, Columns], encloses: Container[int]) -> dict[int, int]:
    """:func:`nest_threads`' ``parent`` (no slack) for threads kept as :data:`Columns`: event index ->
    index of the innermost event among ``encloses`` still open at its start."""
    parent: dict[int, int] = {}
    for ts, negdur, index in threads.values():
        stack: list[tuple[float, int]] = []  # (end, index) of the open events, innermost last
        for p in order_by_start(ts, lambda p: (negdur[p], p)):
            t = ts[p]
            while stack and stack[-1][0] <= t:
                stack.pop()
            i = index[p]
            if stack:
                parent[i] = stack[-1][1]
            if i in encloses:
                stack.append((t - negdur[p], i))
    return parent
