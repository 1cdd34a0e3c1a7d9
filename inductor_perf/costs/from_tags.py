"""Join a profiler trace's kernel events to compile-time tags, through our per-call markers:
markers -> KernelTag -> EventCost (the cost keeps the tag it came from).

Each compiled-graph call is wrapped in a marker event naming the graph instance (and, under
dynamic shapes, the call's size-symbol values; see :mod:`inductor_perf.model.markers`). Inside a marker,
on the same thread, the kernel events are the outermost events whose names are the graph's tag
``profiler_name``s; the k-th event of a name is the k-th call site of that name. GPU tags pass
their cost on to the device kernels launched from inside that event (``correlation``; see
:mod:`inductor_perf.costs.launch`).

Pure: trace and tag lookup in, per-event costs out.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict
from typing import Any, Callable, Mapping

from ..model.event_cost import EventCost, JoinStats
from ..model.events import DEVICE_CATS, event_time, is_device_side, nest_threads
from ..model.markers import MARKER_PREFIX, parse_marker
from ..model.tags import GraphTags, KernelTag
from .launch import GRAPH_LAUNCHES, launched_device_events, replayed_kernels


def _dtype(tag: KernelTag) -> Any:
    import torch

    for node in tag.nodes:
        for name in node.dtypes:
            dt = getattr(torch, name, None)
            if isinstance(dt, torch.dtype):
                return dt
    return None


def event_cost(tag: KernelTag, symbols: Mapping[str, int] | None) -> EventCost:
    """The cost of one call of ``tag`` (symbolic costs evaluated with ``symbols``)."""
    t = tag.evaluated(symbols)
    return EventCost(
        flops=int(t.flops), matmul_flops=int(t.matmul_flops),
        bytes_read=int(t.bytes_read), bytes_written=int(t.bytes_written),
        dtype=_dtype(tag), source=tag.source, module_path=tag.module_path,
        node_names=tuple(n.name for n in tag.nodes), stack_trace=tag.stack_trace,
        kind=tag.kind, graph_id=tag.graph_id, is_backward=tag.is_backward, cost_source="tag",
        eager_ops=tag.eager_ops, tag=tag, recompute_flops=int(t.recompute_flops),
    )


def _split(cost: EventCost, weights: list[float]) -> list[EventCost]:
    """Share one op's cost among the device kernels it launched, by duration."""
    total = sum(weights)
    # Kernels without durations share equally.
    shares = [w / total for w in weights] if total else [1.0 / len(weights)] * len(weights)
    out = []
    acc = [0, 0, 0, 0, 0]
    fields = ("flops", "matmul_flops", "bytes_read", "bytes_written", "recompute_flops")
    for k, share in enumerate(shares):
        vals = []
        for j, f in enumerate(fields):
            full = getattr(cost, f)
            v = full - acc[j] if k == len(shares) - 1 else int(round(full * share))
            acc[j] += v
            vals.append(v)
        out.append(dataclasses.replace(cost, **dict(zip(fields, vals))))
    return out


def _call_cost(tag: KernelTag, symbols: Mapping[str, int] | None, stats: JoinStats) -> EventCost | None:
    """One call's cost, or None (counted) when the trace lacks a size its symbolic cost needs."""
    try:
        return event_cost(tag, symbols)
    except ValueError:
        stats.symbolic_unresolved += 1
        return None


def _share(costs: dict[int, EventCost], events: list, ids: list[int], cost: EventCost) -> int:
    """Give the device events ``ids`` one call site's ``cost``, split by duration; returns len(ids)."""
    for d, c in zip(ids, _split(cost, [float(events[d].get("dur") or 0) for d in ids])):
        costs[d] = c
    return len(ids)


@dataclasses.dataclass(frozen=True)
class _Index:
    """What the join reads of a trace, from one pass over its events."""

    threads: dict[tuple[Any, Any], tuple[list[int], list[float]]]
    """Each CPU thread's complete events in nesting order (index, and start)."""
    markers: list[int]
    corr_to_device: dict[Any, list[int]]
    """Device kernels and copies by ``correlation``."""


def _index(events: list) -> _Index:
    """One pass over the events: CPU threads, our markers, device events by correlation."""
    threads: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
    markers: list[int] = []
    corr_to_device: dict[Any, list[int]] = defaultdict(list)
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        t = event_time(ev.get("ts"), ev.get("dur"))  # the rule every reader keeps
        if t is None:
            continue
        ts, dur = t
        cat = ev.get("cat")
        if is_device_side(cat):
            corr = (ev.get("args") or {}).get("correlation")
            if corr is not None and cat.lower() in DEVICE_CATS:
                corr_to_device[corr].append(i)
            continue
        threads[(ev.get("pid"), ev.get("tid"))].append((ts, -dur, i))
        name = ev.get("name")
        if isinstance(name, str) and name.startswith(MARKER_PREFIX):
            markers.append(i)
    if not markers:  # nothing to join: skip the nesting
        return _Index({}, markers, corr_to_device)
    # Only the nesting order is read here (encloses nothing: no parents): the scan of a marker's
    # window below keeps its own rules (a 1e-3 slack at the marker's end, events that start exactly
    # at a taken event's end).
    order, _ = nest_threads(threads, encloses=())
    ordered = {key: ([i for _, _, i in items], [ts for ts, _, _ in items]) for key, items in order.items()}
    return _Index(ordered, markers, corr_to_device)


def _sites(graph: GraphTags) -> dict[str, list[KernelTag]]:
    """The graph's call sites by profiler name, in call order."""
    by_name: dict[str, list[KernelTag]] = defaultdict(list)
    for tag in graph.kernels:
        by_name[tag.profiler_name].append(tag)
    return by_name


def _join_call(events: list, index: _Index, mi: int, window: tuple[int, int], by_name: dict[str, list[KernelTag]],
               symbols: Mapping[str, int] | None, costs: dict[int, EventCost], stats: JoinStats) -> int:
    """Cost the kernel events of one graph call (the marker ``events[mi]``, whose thread's events
    ``window`` spans); returns how many call sites matched."""
    marker = events[mi]
    thread = index.threads[(marker.get("pid"), marker.get("tid"))]
    idx = thread[0]
    m_end = marker["ts"] + marker["dur"]
    seen: dict[str, int] = defaultdict(int)
    outer_end = -float("inf")
    matched = 0
    for j in range(*window):
        i = idx[j]
        if i == mi:
            continue
        ev = events[i]
        if ev["ts"] + ev["dur"] > m_end + 1e-3:
            continue  # not inside this marker
        if ev["ts"] < outer_end:
            continue  # nested inside an event we already took (aten::addmm -> aten::copy_)
        sites = by_name.get(ev.get("name"))
        if not sites:
            continue
        k = seen[ev["name"]]
        if k >= len(sites):
            continue
        seen[ev["name"]] = k + 1
        outer_end = ev["ts"] + ev["dur"]
        tag = sites[k]
        cost = _call_cost(tag, symbols, stats)
        if cost is None:
            continue
        matched += 1
        if tag.device != "cpu":
            dev = launched_device_events(events, thread, j, outer_end, index.corr_to_device)
            if dev:
                stats.device_events_tagged += _share(costs, events, dev, cost)
                continue
        costs[i] = cost
        stats.events_tagged += 1
    return matched


def _join_replay(events: list, index: _Index, mi: int, window: tuple[int, int], graph: GraphTags,
                 symbols: Mapping[str, int] | None, costs: dict[int, EventCost], stats: JoinStats) -> int:
    """A CUDA graph replay (mode="reduce-overhead"): no per-kernel launches on the host, one
    cudaGraphLaunch whose device kernels are the captured ones, in capture order. Costs them by
    :func:`align_replay`; returns how many call sites matched."""
    marker = events[mi]
    idx = index.threads[(marker.get("pid"), marker.get("tid"))][0]
    m_end = marker["ts"] + marker["dur"]
    device_tags = [t for t in graph.kernels if t.device != "cpu"]
    matched = 0
    for j in range(*window):
        ev = events[idx[j]]
        if ev.get("name") not in GRAPH_LAUNCHES or ev["ts"] + ev["dur"] > m_end + 1e-3:
            continue
        replayed = replayed_kernels(events, ev, index.corr_to_device)
        for tag, dev in align_replay(device_tags, [events[d]["name"] for d in replayed]):
            cost = _call_cost(tag, symbols, stats)
            if cost is None:
                continue
            matched += 1
            n = _share(costs, events, [replayed[k] for k in dev], cost)
            stats.device_events_tagged += n
            stats.graph_replay_kernels += n
    return matched


def costs_from_tags(trace: dict, lookup: Callable[[int], GraphTags | None]
                    ) -> tuple[dict[int, EventCost], JoinStats]:
    """Per-event costs for every kernel event that ran inside one of our markers.

    ``lookup(instance_id)`` returns the graph's tags (``inductor_perf.model.tags.REGISTRY.get``).
    """
    events = trace.get("traceEvents") or []
    stats = JoinStats()
    index = _index(events)
    if not index.markers:
        return {}, stats
    costs: dict[int, EventCost] = {}
    sites_by_graph: dict[int, dict[str, list[KernelTag]]] = {}
    for mi in index.markers:
        marker = events[mi]
        parsed = parse_marker(marker["name"])
        if parsed is None:
            continue
        stats.markers += 1
        instance_id, _, symbols = parsed
        graph = lookup(instance_id)
        if graph is None:
            stats.markers_unknown_graph += 1
            continue
        if not graph.tagged:
            stats.untagged_graphs += 1
            continue
        by_name = sites_by_graph.get(instance_id)
        if by_name is None:  # built once per graph, not once per call
            by_name = sites_by_graph[instance_id] = _sites(graph)
        starts = index.threads[(marker.get("pid"), marker.get("tid"))][1]
        window = (bisect.bisect_left(starts, marker["ts"]), bisect.bisect_right(starts, marker["ts"] + marker["dur"]))
        matched = _join_call(events, index, mi, window, by_name, symbols, costs, stats)
        if matched == 0:
            matched = _join_replay(events, index, mi, window, graph, symbols, costs, stats)
        stats.unmatched_call_sites += len(graph.kernels) - matched
        stats.per_marker_counts.append((instance_id, matched))
    return costs, stats


def align_replay(tags: list[KernelTag], names: list[str]) -> list[tuple[KernelTag, list[int]]]:
    """Pair a graph's device call sites with the kernels of one CUDA graph replay.

    The replay runs the captured kernels in capture order, which is call-site order. A generated
    (Triton) call site keeps its name on the device, so it is matched to the next kernel of that
    name; the kernels between two matched Triton kernels belong to the extern call sites between
    them (cuBLAS, cuDNN... names say nothing of the op): all of them to a single extern site, one
    each when the counts agree, none when they don't (no guess). Returns (tag, kernel positions).

    >>> from inductor_perf.model.tags import KernelTag
    >>> t = lambda n, kind: KernelTag(graph_id=0, is_backward=False, kernel_name=n, kind=kind, call_index=0,
    ...     nodes=(), flops=0, matmul_flops=0, bytes_read=0, bytes_written=0, source=None,
    ...     stack_trace=None, module_path=None, profiler_name=n, device="cuda")
    >>> got = align_replay([t("triton_a", "generated"), t("mm", "extern"), t("triton_b", "generated")],
    ...                    ["triton_a", "gemm_main", "gemm_splitk_reduce", "triton_b"])
    >>> [(tag.kernel_name, pos) for tag, pos in got]
    [('triton_a', [0]), ('mm', [1, 2]), ('triton_b', [3])]
    """
    out: list[tuple[KernelTag, list[int]]] = []
    pos = 0
    pending: list[KernelTag] = []

    def settle(upto: int) -> None:
        between = [k for k in range(pos, upto) if not names[k].startswith("triton")]
        if len(pending) == 1 and between:
            out.append((pending[0], between))
        elif pending and len(pending) == len(between):
            out.extend((tag, [k]) for tag, k in zip(pending, between))
        pending.clear()

    for tag in tags:
        if tag.kind != "generated":
            pending.append(tag)
            continue
        j = next((k for k in range(pos, len(names)) if names[k] == tag.kernel_name), None)
        if j is None:
            continue  # not in this replay: leave it unmatched rather than guess
        settle(j)
        out.append((tag, [j]))
        pos = j + 1
    settle(len(names))
    return out
