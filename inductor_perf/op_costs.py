"""Costs of a plain torch.profiler trace from the shapes it recorded (``record_shapes=True``): each
op's FLOPs and bytes (:mod:`inductor_perf.op_formulas`), put on exactly one event.

An op's cost goes on the device kernel it launched (found by :mod:`inductor_perf.launch_join`; the
longest one when several), else on the CPU op itself; of nested ops with formulas only the
innermost one that could be costed counts.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from .event_cost import AugmentStats, EventCost
from .events import COST_SOURCE, KERNEL_FLOP, KERNEL_MATMUL_FLOP, KERNEL_NUM_GB, number
from .launch_join import KERNEL, LaunchIndex
from .op_formulas import ATEN_PREFIX, NO_SHAPES, UNKNOWN_DTYPE, OpCost
from .op_meta import op_cost_or_reason, wants_cost
from .trace_format import validate_trace


def warm_up() -> None:
    """Import what attribution, the device table and the roofline need before a large trace is
    loaded (all torch-free: dtypes are handled by name, see
    :func:`~inductor_perf.op_formulas.parse_dtype_name`)."""
    for m in ("inductor_perf.device_table", "inductor_perf.roofline"):
        importlib.import_module(m)


def _precost(args: dict) -> EventCost | None:
    """Cost already on the event (Triton launches with benchmark_kernel / profile_bandwidth)."""
    if KERNEL_FLOP not in args and KERNEL_NUM_GB not in args:
        return None  # the usual case, decided without the lookups below
    flop = args.get(KERNEL_FLOP)
    gb = args.get(KERNEL_NUM_GB)
    flop_n = number(flop)
    gb_n = number(gb)
    if flop_n is None and gb_n is None:
        return None
    flops = int(flop_n) if flop_n is not None and flop_n >= 0 else 0
    nbytes = int(round(gb_n * 1e9)) if gb_n is not None and gb_n >= 0 else 0
    src = args.get(COST_SOURCE)
    matmul = number(args.get(KERNEL_MATMUL_FLOP))
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
    validate_trace(trace)
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


_KF, _KGB = KERNEL_FLOP, KERNEL_NUM_GB
_AP = len(ATEN_PREFIX)


class CostJoin(LaunchIndex):
    """:func:`costs_from_shapes` one event at a time: ``add(i, event)`` for each dict event in
    order, then ``finish(n_events)``. Keeps only what the join of most traces reads, not the events,
    so a caller that parses events one by one never has to hold them all; ``load(i)`` gives event
    ``i`` again (see :class:`~inductor_perf.launch_join.LaunchIndex`).
    """

    _STATE = LaunchIndex._STATE + ("own", "failed", "recognized", "pre")
    _COUNTS = LaunchIndex._COUNTS + ("triton_costed",)

    def __init__(self, load: Callable[[int], Any]) -> None:
        super().__init__(load)
        self.own: dict[int, EventCost] = {}
        self.memo: dict[Any, Any] = {}
        self.failed: dict[int, str] = {}
        self.recognized: set[int] = set()
        self.pre: dict[int, EventCost] = {}
        """Kernel -> the cost its launch args carry (:func:`_precost`)."""

    def add(self, i: int, ev: dict) -> None:
        """Index event ``i`` (a dict) and cost it when it is an op with a formula."""
        got = self.index(i, ev)
        if got is not None:
            self.cost(i, ev, *got)

    def cost(self, i: int, ev: dict, kind: int, args: dict) -> None:
        """The costing half of :meth:`add`, for what :meth:`index` returned (a hot loop calls the
        two itself: one Python call less per event)."""
        if kind == KERNEL:
            pre = _precost(args) if (_KF in args or _KGB in args) else None
            if pre is not None:
                self.pre[i] = pre
            return
        name = ev.get("name")
        if type(name) is not str or not wants_cost(name):
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
                self.stats.triton_costed += 1
            return
        self.recognized.add(i)
        if type(result) is EventCost:
            self.own[i] = result
        else:
            self.failed[i] = result

    def _merge(self, st: dict[str, Any]) -> None:
        super()._merge(st)
        # Keyed by event index: the two ranges never share a key.
        for n in ("own", "failed", "pre"):
            getattr(self, n).update(st[n])
        self.recognized |= st["recognized"]

    def finish(self, n_events: int) -> tuple[dict[int, EventCost], AugmentStats]:
        """The costs by event index, and the stats of a trace of ``n_events`` events."""
        self.stats.events = n_events
        parent = self.parents()
        shadowed = self._count_failures(parent)
        return self._place(parent, shadowed), self.stats

    def _count_failures(self, parent: dict[int, int]) -> set[int]:
        """Count the ops that could not be costed, once per nest; returns the costed ops that a
        costed op below them shadows (only the innermost costed op of a nest counts)."""
        own, recognized, stats = self.own, self.recognized, self.stats
        shadowed: set[int] = set()
        covered: set[int] = set()  # recognized ops with a costed op at or below them
        for i in own:
            covered.add(i)
            p = parent.get(i)
            while p is not None:
                if p in own and (own[i].matmul_flops or not own[p].matmul_flops):
                    shadowed.add(p)  # a matmul is not shadowed by the copy/fill it does inside
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
        return shadowed

    def _place(self, parent: dict[int, int], shadowed: set[int]) -> dict[int, EventCost]:
        """Put each costed op's cost on one event: kernel -> launching op -> nearest costed op.
        Each op keeps its longest kernel, which did the op's main work (split-K reductions, layout
        transforms and fills are short); the first one wins a tie. Ops without kernels keep it."""
        stats, own, kernels, pres = self.stats, self.own, self.kernels, self.pre
        costs: dict[int, EventCost] = {}
        best: dict[int, tuple[float, int]] = {}  # op -> (dur, kernel)
        several: set[int] = set()
        served: set[int] = set()
        for k, launch in self.launches(parent):
            target = launch
            while target is not None and target not in own:
                target = parent.get(target)
            pre = pres.get(k)
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
                dur = kernels[k][2]
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
        return costs


def _has_recognized_ancestor(i: int, parent: dict[int, int], recognized: set[int]) -> bool:
    p = parent.get(i)
    while p is not None:
        if p in recognized:
            return True
        p = parent.get(p)
    return False
